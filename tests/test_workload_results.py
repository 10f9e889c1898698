"""Issue 28's harness side: what a run of any workload records (tokens/s, FLOPs, MFU against the GPU peak table),
how commands, campaigns, compare and the report name the workload, and format 3 files read as ResNet-50's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_one_line_error, run_main
from tests.record_fixtures import write_records
from tests.standins.engine import StandInEngine
from trainbench.bench.compare import compare_loaded, load_run
from trainbench.bench.ranks import merge_ranks
from trainbench.bench.sweep import run_header, run_title
from trainbench.bench.throughput_run import ThroughputRun
from trainbench.bench.work import peak_of, work_values
from trainbench.bench.worker import measure
from trainbench.campaign.matrix import Matrix, config_string, illegal
from trainbench.cli.main import build_parser
from trainbench.cli.options import model_config
from trainbench.config import BenchConfig, ModelConfig
from trainbench.errors import UsageError
from trainbench.render.console import format_table
from trainbench.results.peaks import TERA, arithmetic, gpu_peaks, peak_flops
from trainbench.results.records import FORMAT, BatchResult, Status
from trainbench.results.store import read_summary

H100 = "NVIDIA H100 80GB HBM3"  # NVML's name of the SXM part


# --- the peak table ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "precision", "tflops"), [
    (H100, "bf16", 989.0),
    (H100, "fp16", 989.0),
    (H100, "tf32", 495.0),  # fp32 with --matmul-precision high: the TF32 Tensor Cores (results.peaks.arithmetic)
    (H100, "fp32", 67.0),  # fp32 kept fp32 (highest, the default): the CUDA cores' peak
    ("NVIDIA H100 PCIe", "bf16", 756.0),
    ("NVIDIA H200", "bf16", 989.0),
    ("NVIDIA A100-SXM4-80GB", "bf16", 312.0),
    ("NVIDIA A100 80GB PCIe", "tf32", 156.0),
    ("Tesla V100-SXM2-16GB", "tf32", 15.7),  # no TF32: the CUDA cores' fp32
    ("Tesla V100-SXM2-32GB", "fp16", 125.0),
    ("Tesla V100-PCIE-16GB", "fp16", 112.0),
    ("Tesla V100S-PCIE-32GB", "fp16", 130.0),  # a part of its own, not the V100 PCIe (FIDELITY.md bug 6)
    ("Tesla V100S-PCIE-32GB", "fp32", 16.4),
    ("NVIDIA B200", "bf16", 2250.0),
    ("NVIDIA B200", "fp16", 2250.0),  # fp16 runs at the bf16 rate
    ("NVIDIA GB200", "bf16", 2500.0),  # not the HGX B200's figure
])
def test_a_gpu_is_matched_on_its_nvml_name(name: str, precision: str, tflops: float) -> None:
    peak = peak_flops([name], precision)
    assert peak.flops == pytest.approx(tflops * TERA)
    entry = gpu_peaks(name)
    assert entry is not None and entry.source in peak.note


def test_fp32_is_judged_by_the_arithmetic_its_products_ran_in() -> None:
    assert [arithmetic("fp32", "highest"), arithmetic("fp32", "high")] == ["fp32", "tf32"]
    assert [arithmetic("bf16", "high"), arithmetic("fp16", "highest")] == ["bf16", "fp16"]  # autocast's own


def test_the_peaks_of_several_gpus_add_up() -> None:
    assert peak_flops([H100, H100], "bf16").flops == pytest.approx(2 * 989 * TERA)


@pytest.mark.parametrize(("device", "names", "precision", "reason"), [
    ("cpu", [], "fp32", "the CPU"),
    ("cuda", ["NVIDIA GeForce GTX 1080"], "fp32", "no peak FLOP/s known for GPU 'NVIDIA GeForce GTX 1080'"),
    ("cuda", ["NVIDIA H100 NVL"], "bf16", "no peak FLOP/s known"),  # a part of its own, not the SXM's peaks
    ("cuda", ["Tesla V100-SXM2-16GB"], "bf16", "no bf16 peak for the V100 SXM2"),
    ("cuda", [], "bf16", "names are unknown"),
])
def test_no_peak_is_none_with_the_reason(device: str, names: list[str], precision: str, reason: str) -> None:
    peak = peak_of(device, names, precision)
    assert peak.flops is None and reason in peak.note


def test_work_values_follow_from_the_rate() -> None:
    peak = peak_flops([H100], "bf16")
    values = work_values(100.0, 256.0, 3e9, peak)
    assert values["tokens_per_sec"] == 25_600.0 and values["achieved_flops"] == 3e11
    assert values["mfu"] == pytest.approx(3e11 / (989 * TERA)) and values["peak_flops"] == peak.flops
    no_flops = work_values(100.0, None, None, peak)
    assert no_flops["tokens_per_sec"] is None and no_flops["mfu"] is None and "flops_note" in no_flops["mfu_note"]


# --- the worker, the ranks, the header --------------------------------------------------------------------------


def _config(workload: str = "bert", **model: Any) -> BenchConfig:
    return BenchConfig(model=ModelConfig(workload=workload, size="tiny", device="cpu", **model), batch_size=4,
                       warmup_steps=1, steps=3, telemetry_interval_s=0)


def test_the_worker_records_tokens_flops_and_why_there_is_no_mfu_on_the_cpu() -> None:
    engine = StandInEngine("x", samples_per_step=4, tokens_per_step=4 * 32, parameters=1234,
                           train_flops_per_sample=5e6, flops_note="counted by a stand-in")
    values = measure(_config(), engine).result.values  # type: ignore[arg-type]
    rate = values["samples_per_sec"]
    assert values["tokens_per_sec"] == pytest.approx(32 * rate)
    assert values["achieved_flops"] == pytest.approx(5e6 * rate)
    assert values["parameters"] == 1234 and values["flops_note"] == "counted by a stand-in"
    assert values["mfu"] is None and "the CPU" in values["mfu_note"]


def test_a_workload_without_tokens_has_no_tokens_per_sec() -> None:
    values = measure(_config("resnet50"), StandInEngine("x")).result.values  # type: ignore[arg-type]
    assert values["tokens_per_sec"] is None and values["achieved_flops"] is None  # the stand-in counted no FLOPs


def test_ranks_merge_into_the_world_s_tokens_flops_and_mfu() -> None:
    peak = 989 * TERA

    def rank(window_s: float) -> BatchResult:
        rate = 4 * 3 / window_s
        return BatchResult(4, Status.OK, None, {
            "samples_per_sec": rate, "window_samples_per_sec": [rate], "window_s": window_s, "timed_steps": 3,
            "step_time_median_s": window_s / 3, "train_flops_per_sample": 1e9, "parameters": 10,
            "tokens_per_sec": 128 * rate, "achieved_flops": 1e9 * rate, "peak_flops": peak,
            "mfu": 1e9 * rate / peak, "mfu_note": "against 1 x H100 SXM dense bf16 peak"})

    merged = merge_ranks([(0, rank(1.0)), (1, rank(2.0))], world_size=2).values
    world_rate = 2 * 12 / 2.0  # every rank's samples over the slowest window
    assert merged["samples_per_sec"] == world_rate
    assert merged["tokens_per_sec"] == pytest.approx(128 * world_rate)
    assert merged["achieved_flops"] == pytest.approx(1e9 * world_rate)
    assert merged["peak_flops"] == 2 * peak and merged["mfu"] == pytest.approx(1e9 * world_rate / (2 * peak))
    assert merged["parameters"] == 10 and "2 ranks" in merged["mfu_note"]


def test_the_header_names_the_workload_and_takes_the_sample_s_cost_from_the_first_result(tmp_path: Path) -> None:
    config = _config(seq_len=24)
    header = run_header(config).to_json()
    assert (header["workload"], header["sample_unit"], header["size"], header["params"]) == \
        ("bert", "sequence", "tiny", {"seq_len": 24})
    assert "image_size" not in header  # a workload without images
    store = ThroughputRun(tmp_path, header)
    store.add(BatchResult.failed(1, Status.OOM, "out of memory"))
    store.add(BatchResult(2, Status.OK, None, {"samples_per_sec": 5.0, "parameters": 77,
                                                "train_flops_per_sample": 2e6, "flops_note": "analytic"}))
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["format"] == FORMAT == 6
    assert (saved["parameters"], saved["train_flops_per_sample"], saved["flops_note"]) == (77, 2e6, "analytic")
    assert saved["results"][1]["tokens_per_sec"] is None and "mfu" in saved["results"][1]


def test_titles_come_from_the_descriptor() -> None:
    assert run_title(ModelConfig(device="cpu")) == "ResNet-50 torch fp32 on cpu, image 224px"
    assert run_title(ModelConfig(workload="gpt2", size="tiny", device="cpu")) == \
        "GPT-2 small torch fp32 on cpu, tiny, seq_len 32"


def _format3_run(folder: Path, workload: str | None = None, rate: float = 10.0) -> Path:
    folder.mkdir(parents=True)
    header: dict[str, Any] = {"format": 3, "framework": "torch", "precision": "fp32", "image_size": 224,
                              "device": "cpu", "data": "synthetic", "model": {"framework": "torch"}}
    if workload is not None:
        header = {**header, "format": 4, "workload": workload, "sample_unit": "sequence"}
    row = {"batch_size": 2, "status": "ok", "samples_per_sec": rate, "window_samples_per_sec": [rate]}
    (folder / "summary.json").write_text(json.dumps({**header, "results": [row]}))
    (folder / "steps.csv").write_text("batch_size,phase,step,seconds\n2,timed,0,0.2\n2,timed,1,0.2\n")
    return folder


def test_a_format_3_summary_reads_as_resnet50_s(tmp_path: Path) -> None:
    summary = read_summary(_format3_run(tmp_path / "old") / "summary.json")
    assert (summary.header["workload"], summary.header["sample_unit"], summary.format) == ("resnet50", "image", 3)
    assert summary.results[0].values["samples_per_sec"] == 10.0


# --- compare and the console ------------------------------------------------------------------------------------


def test_compare_refuses_runs_of_unlike_workloads(tmp_path: Path) -> None:
    a, b = _format3_run(tmp_path / "a"), _format3_run(tmp_path / "b", "bert")
    with pytest.raises(UsageError, match=r"^compare: run A is resnet50, run B is bert: "):
        compare_loaded(load_run(a), load_run(b))
    assert_one_line_error(run_main("compare", str(a), str(b)), "run A is resnet50, run B is bert")


def test_compare_shows_tokens_and_mfu_where_recorded(tmp_path: Path) -> None:
    a, b = _format3_run(tmp_path / "a", "bert"), _format3_run(tmp_path / "b", "bert", rate=12.0)
    for folder, mfu in ((a, 0.25), (b, 0.30)):
        data = json.loads((folder / "summary.json").read_text())
        data["results"][0] |= {"tokens_per_sec": 32 * data["results"][0]["samples_per_sec"], "mfu": mfu,
                               "peak_flops": 1.0e15}  # an MFU is read only with the peak it is of
        (folder / "summary.json").write_text(json.dumps(data))
    row = compare_loaded(load_run(a), load_run(b)).iloc[0]
    assert (row["tokens_per_sec_a"], row["tokens_per_sec_b"], row["mfu_a"], row["mfu_b"]) == (320, 384, 0.25, 0.3)
    out = run_main("compare", str(a), str(b)).stdout
    header, line = out.splitlines()[1:3]
    assert header.split("  ")[-4:] == ["A tokens/s", "B tokens/s", "A MFU %", "B MFU %"] and "B sequences/s" in header
    assert line.split()[1:3] == ["10.00", "12.00"] and line.split()[-4:] == ["320.0", "384.0", "25.0", "30.0"]


def test_the_console_table_is_in_the_workload_s_unit() -> None:
    row = {"batch_size": 2, "status": "ok", "samples_per_sec": 10.0, "tokens_per_sec": 320.0,
           "achieved_flops": 2.5e12, "mfu": 0.125, "timed_steps": 3}
    header, line = format_table([row], "sequence").splitlines()
    assert "sequences/s" in header and "tokens/s" in header and "TFLOP/s" in header and "MFU %" in header
    assert "320.00" in line and "2.50" in line and "12.50" in line


# --- the command line and campaigns -------------------------------------------------------------------------------


def _model(*argv: str) -> ModelConfig:
    return model_config(build_parser().parse_args(["throughput", "--device", "cpu", *argv]))


def test_the_workload_options_build_the_model() -> None:
    model = _model("--workload", "bert", "--size", "tiny")
    assert (model.workload, model.size, model.params()) == ("bert", "tiny", {"seq_len": 32})
    assert _model("--workload", "transformer", "--seq-len", "64").param("seq_len") == 64
    assert _model().params() == {"image_size": 224, "num_classes": 1000}  # resnet50 as before


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--seq-len", "64"], "--seq-len does not apply to --workload resnet50"),
    (["--workload", "bert", "--image-size", "64"], "--image-size does not apply to --workload bert"),
    (["--workload", "gpt2", "--framework", "tf"], "--workload gpt2 has no tf implementation"),
    (["--workload", "bert", "--framework", "tf", "--data", "/no/such/folder"],
     "data directory /no/such/folder does not exist"),
    (["--workload", "bert", "--seq-len", "4096"], "sequence length must be a whole number from 8 to 512"),
    (["--workload", "bret"], "unknown workload 'bret'"),
    (["--workload", "bert", "--channels-last"], "--channels-last does not apply to --workload bert"),
])
def test_what_a_workload_refuses_is_one_line(argv: list[str], fragment: str) -> None:
    assert_one_line_error(run_main("throughput", "--device", "cpu", *argv), fragment)


def test_input_bench_refuses_records_of_another_workload(tmp_path: Path) -> None:
    folder = write_records(tmp_path / "bert", "bert", records=2, shards=1)
    assert_one_line_error(run_main("input-bench", str(folder), "--workload", "transformer", "--framework", "tf"),
                          "holds bert records; --workload transformer reads translation records",
                          "trainbench data translate")


def test_campaign_axes_drop_what_a_workload_refuses_and_name_it() -> None:
    assert illegal({"workload": "resnet50", "seq_len": 64}) == \
        "--seq-len does not apply to --workload resnet50 (its settings: image_size, num_classes)"
    assert "no tf implementation" in str(illegal({"workload": "gpt2", "framework": "tf"}))
    assert illegal({"workload": "bert", "size": "tiny", "seq_len": 64}) is None
    matrix = Matrix(axes={"workload": ("resnet50", "bert"), "batch_size": (1,)})
    assert config_string(matrix, {"workload": "bert"}) == "bert-torch-fp32-seq128"
    assert config_string(matrix, {"workload": "resnet50"}) == "resnet50-torch-fp32-img224"
    one = Matrix(axes={"batch_size": (1,)})
    assert config_string(one, {}) == "torch-fp32-img224"  # campaigns of ResNet-50 keep their folder names
    tiny = Matrix(axes={"workload": ("bert",), "size": ("tiny",), "batch_size": (1,)})
    assert config_string(tiny, {"workload": "bert", "size": "tiny"}) == "bert-torch-fp32-tiny-seq32"


@pytest.mark.parametrize(("argv", "says"), [
    (["throughput"], "Measure a workload's training throughput"),
    (["profile"], "of the workload's network (--workload, default resnet50)"),
    (["train"], "Train the workload's network (--workload, default resnet50)"),
    (["variability"], "how the GPUs differ (samples/s in the workload's unit"),
    (["variability", "run"], "a GPU whose median samples/s is below"),
    (["compare"], "test on the windows' samples/s"),
])
def test_the_help_of_a_command_that_runs_any_workload_speaks_of_samples(argv: list[str], says: str,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as leaving:
        build_parser().parse_args([*argv, "--help"])
    assert leaving.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse's line breaks undone
    assert says in text
    # images/s only as the default workload's unit; ResNet-50 only as the recipe train's defaults come from
    assert "images/s" not in text.replace("default resnet50: images/s", "") and "per image" not in text
    assert "ResNet-50" not in text.replace("suite's ResNet-50 recipe", "")
    if "--windows N" in text:
        assert "samples/s (in the workload's unit) median, min and max" in text


def test_input_bench_refuses_an_image_size_for_a_workload_without_images(tmp_path: Path) -> None:
    """As throughput and train refuse it: the option is not silently ignored."""
    folder = write_records(tmp_path / "bert", "bert", records=2, shards=1)
    assert_one_line_error(run_main("input-bench", str(folder), "--workload", "bert", "--image-size", "64"),
                          "--image-size does not apply to --workload bert (its settings: seq_len)")


def test_records_without_their_manifest_are_named_so_not_called_imagenet(tmp_path: Path) -> None:
    folder = write_records(tmp_path / "bert", "bert", records=2, shards=1)
    (folder / "manifest.json").unlink()
    assert_one_line_error(run_main("throughput", "--workload", "bert", "--size", "tiny", "--data", str(folder),
                                   "--device", "cpu", "--output", str(tmp_path / "out")),
                          f"--data {folder} holds TFRecords without a manifest.json (read as ImageNet records")
    assert_one_line_error(run_main("throughput", "--workload", "resnet50", "--size", "tiny", "--data", str(folder),
                                   "--device", "cpu", "--output", str(tmp_path / "out")),
                          f"--data {folder}: its records name 0 ImageNet classes, and a classifier needs 2 or more")
    assert not (tmp_path / "out").exists()
