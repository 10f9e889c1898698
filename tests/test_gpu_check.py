"""benchmarks/gpu_check: the orchestration (goals, merge of parts, table, budgets, part 4's Llama commands and
readers) without subprocesses, and one CPU smoke run of all four parts end to end (the check CI runs for lack of a
GPU)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, assert_one_line_error

sys.path.insert(0, str(REPO / "benchmarks"))
from gpu_check import plan, run, table

RUN = [sys.executable, "benchmarks/gpu_check/run.py"]


def step_record(name: str, status: str = "ok", figures: dict[str, Any] | None = None, device: str = "cuda",
                **extra: Any) -> dict[str, Any]:
    return {"name": name, "status": status, "device": device, "figures": figures or {}, "commands": ["cmd"],
            **extra}


def part(steps: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"part": {"command": "run.py", "time_utc": "now", "seconds": 1.0}, "steps": steps, "environment": None}


def test_goals_are_judged_on_a_gpu_only_and_each_way() -> None:
    assert table.verdict("sampler_ratio_b128", 0.995, "cuda") == "met"
    assert table.verdict("sampler_ratio_b128", 0.98, "cuda") == "missed"
    assert table.verdict("energy_over_sampled_b32", 1.049, "cuda") == "met"
    assert table.verdict("energy_over_sampled_b32", 0.94, "cuda") == "missed"
    assert table.verdict("loader_gpu_of_synthetic", 0.89, "cuda") == "missed"
    assert table.verdict("torchrun_ratio_b256", 0.99, "cuda") == "met"
    assert table.verdict("best_at_32", 2600.0, "cpu") == "not judged: cpu"
    assert table.verdict("best_images_per_sec", float("nan"), "cuda") == "no figure"
    assert table.verdict("eager_b32", 10.0, "cuda") == ""  # a figure without a goal


def test_parts_merge_and_a_recorded_part_is_refused() -> None:
    first = table.merge(None, 1, part({"telemetry": step_record("telemetry", figures={"sampler_ratio_b32": 1.0})}))
    second = table.merge(first, 2, part({
        "eager": step_record("eager", figures={"eager_b32": 2000.0, "eager_b256": 3000.0}),
        "cuda_graph": step_record("cuda_graph", figures={"cuda_graph_b32": 2700.0, "cuda_graph_b256": 4200.0})}))
    assert list(second["steps"]) == ["telemetry", "eager", "cuda_graph"] and set(second["parts"]) == {"1", "2"}
    assert second["derived"] == {"best_images_per_sec": 4200.0, "best_at_32": 2700.0}
    assert first["parts"].keys() == {"1"}  # the earlier record is not changed in place
    with pytest.raises(ValueError, match="part 1 is already recorded"):
        table.merge(second, 1, part({}))


def test_table_rows_show_not_run_failed_and_measured_figures() -> None:
    record = table.merge(None, 1, part({
        "nvml_probe": step_record("nvml_probe", table.NOT_RUN_NO_GPU, device="cpu",
                                  expected=["energy_update_period_ms"]),
        "telemetry": step_record("telemetry", figures={"sampler_ratio_b2": 0.97}, device="cpu",
                                 not_run={"energy_over_sampled_b32": table.NOT_RUN_NO_GPU}),
        "ncu": step_record("ncu", "failed: ==ERROR== the profiler stopped", expected=["ncu_tensor_pct_b32"])}))
    by_figure = {row["figure"]: row for row in table.rows(record)}
    assert by_figure["energy_update_period_ms"]["value"] == table.NOT_RUN_NO_GPU
    assert by_figure["energy_over_sampled_b32"]["value"] == table.NOT_RUN_NO_GPU
    assert by_figure["energy_over_sampled_b32"]["goal"] == "within 5 % of 1"
    assert (by_figure["sampler_ratio_b2"]["value"], by_figure["sampler_ratio_b2"]["met"]) == ("0.97", "not judged: cpu")
    assert by_figure["ncu_tensor_pct_b32"]["value"] == "failed: ==ERROR== the profiler stopped"
    assert (by_figure["sampler_ratio_b2"]["command"], by_figure["energy_over_sampled_b32"]["command"]) == \
        ("cmd", "(as above)")
    assert "sampler_ratio_b32" not in by_figure  # a CPU run's rows are what it measured, not the GPU's names
    text = table.markdown(record)
    assert "| figure | value | goal | met | command |" in text
    assert "- ncu: failed: ==ERROR== the profiler stopped" in text


def test_each_part_fits_its_time_budget_and_ncu_leaves_the_clocks_alone(tmp_path: Path) -> None:
    assert {step.part for step in plan.steps()} == set(plan.PARTS) == {1, 2, 3, 4}
    for number in plan.PARTS:
        assert sum(step.budget_s for step in plan.part_steps(number)) <= plan.PART_BUDGET_S <= 8.5 * 60
    ctx = plan.Context("cuda", tmp_path, "python3")
    ncu = next(step for step in plan.steps() if step.name == "ncu").commands(ctx)[0]
    assert ncu[ncu.index("--clock-control") + 1] == "none"
    assert {"--precision", "bf16", "--channels-last"} <= set(ncu)
    names = [step.name for step in plan.steps()]
    assert len(names) == len(set(names)) and {f"workload_{w}" for w in plan.WORKLOADS} <= set(names)


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_part_4_runs_llama_1b_in_bf16_on_the_gpu_and_the_tiny_llama_on_the_cpu(tmp_path: Path) -> None:
    """Part 4: Llama-3.2-1B, bf16, 8,192 tokens, the reference optimizer (none named), with and without activation
    checkpointing, then the largest batch without; each worker given up inside its step's budget."""
    names = [step.name for step in plan.part_steps(4)]
    assert names == ["llama_1b_none", "llama_1b_full", "llama_1b_max_batch"]
    gpu, cpu = plan.Context("cuda", tmp_path, "python3"), plan.Context("cpu", tmp_path, "python3")
    for step in plan.part_steps(4):
        (argv,) = step.commands(gpu)
        assert argv[:5] == ["python3", "-m", "trainbench", "throughput", "--framework"]
        assert [option(argv, name) for name in ("--workload", "--size", "--seq-len", "--device", "--precision")] == \
            ["llama", "1b", "8192", "cuda", "bf16"]
        assert "--optimizer" not in argv and "--memory-limit" not in argv
        assert option(argv, "--output") == str(tmp_path / "runs" / step.name)
        timeout = int(option(argv, "--timeout"))
        assert timeout + 30 <= step.budget_s  # one hung worker cannot eat the step, a slow one has room to finish
        (small,) = step.commands(cpu)
        assert [option(small, name) for name in ("--size", "--device", "--precision", "--steps")] == \
            ["tiny", "cpu", "fp32", "1"]
        assert "--seq-len" not in small and "--timeout" not in small
        assert step.needs == ("package:transformers",) and step.ok_codes == (0, 1)
    none, full, search = (step.commands(gpu)[0] for step in plan.part_steps(4))
    assert (option(none, "--activation-checkpointing"), option(full, "--activation-checkpointing")) == ("none", "full")
    assert option(none, "--batch-sizes") == option(full, "--batch-sizes") == "4,2,1"
    assert (option(none, "--warmup"), option(none, "--steps")) == ("2", "5")
    assert "--max-batch" in search and option(search, "--activation-checkpointing") == "none"
    assert option(search, "--batch-sizes") == "4"  # the search's start: 8 should not fit an H200 without checkpointing
    small_search = plan.part_steps(4)[2].commands(cpu)[0]
    assert (option(small_search, "--batch-sizes"), option(small_search, "--memory-limit")) == ("1", "1MiB")


def llama_row(batch: int, status: str = "ok", checkpointing: str = "full", **values: Any) -> dict[str, Any]:
    measured = {"tokens_per_sec": 8192.0 * batch, "mfu": 0.3, "hfu": 0.4, "peak_memory_bytes": 30 * 2**30 * batch,
                "hardware_flops_per_sample": 1.2e14, "train_flops_per_sample": 9e13} if status == "ok" else {}
    return {"batch_size": batch, "status": status, "activation_checkpointing": checkpointing,
            "error": None if status == "ok" else "it broke", **measured, **values}


def write_run(folder: Path, rows: list[dict[str, Any]], verdict: dict[str, Any] | None = None) -> None:
    run_dir = folder / "20260101-000000_torch_bf16_cuda"
    run_dir.mkdir(parents=True)
    (run_dir / "summary.json").write_text(json.dumps({"params": {"seq_len": 8192}, "results": rows}))
    if verdict is not None:
        (run_dir / "max_batch.json").write_text(json.dumps(verdict))


def test_a_llama_batch_out_of_memory_is_a_finding_and_an_error_fails_the_step(tmp_path: Path) -> None:
    ctx = plan.Context("cuda", tmp_path, sys.executable)
    step = next(step for step in plan.steps() if step.name == "llama_1b_full")
    write_run(ctx.folder("llama_1b_full"), [llama_row(4, "oom"), llama_row(2), llama_row(1, "error")])
    figures = step.read(ctx, "")
    info = figures.pop("info")
    assert figures == {
        "llama_1b_full_tokens_per_sec_b2": 16384.0, "llama_1b_full_mfu_b2": 0.3, "llama_1b_full_hfu_b2": 0.4,
        "llama_1b_full_peak_memory_bytes_b2": 60 * 2**30, "llama_1b_full_hardware_flops_per_sample": 1.2e14,
        **{f"llama_1b_full_{name}_b4": "oom" for name in ("tokens_per_sec", "mfu", "hfu", "peak_memory_bytes")},
        "failure": "failed: batch 1: error: it broke"}
    assert info["train_flops_per_sample"] == 9e13 and info["params"] == {"seq_len": 8192}
    assert set(step.expected) >= set(figures) - {"failure"}  # every figure a GPU run reads has its row
    other = plan.Context("cuda", tmp_path / "other", sys.executable)  # a row measured without checkpointing
    write_run(other.folder("llama_1b_full"), [llama_row(2, checkpointing="none")])
    with pytest.raises(plan.StepFailure, match="ran with --activation-checkpointing none, not full"):
        step.read(other, "")


def verdict(largest: int | None, complete: bool = True, stopped: str | None = None) -> dict[str, Any]:
    fit = None if largest is None else {"batch_size": largest, "samples_per_sec": 1.0, "peak_memory_bytes": 120 * 2**30,
                                        "peak_memory_kind": "torch.cuda.max_memory_allocated"}
    return {"format": 6, "memory_limit_bytes": None, "start": 4, "complete": complete, "largest_fit": fit,
            "first_no_fit": None, "stopped": stopped, "capped": False,
            "tries": [{"batch_size": 4, "fits": largest is not None, "status": "ok" if largest else "oom",
                       "peak_memory_bytes": None, "why": None if largest else "oom"}]}


def test_the_max_batch_step_reads_the_verdict_and_a_search_cut_short_says_only_what_fits(tmp_path: Path) -> None:
    step = next(step for step in plan.steps() if step.name == "llama_1b_max_batch")
    ended = plan.Context("cuda", tmp_path / "ended", sys.executable)
    write_run(ended.folder(step.name), [llama_row(4, checkpointing="none"), llama_row(8, "oom", "none")], verdict(4))
    figures = step.read(ended, "")
    assert figures["info"]["tries"] == [[4, True, "ok"]] and figures["info"]["complete"]
    del figures["info"]
    assert figures == {"llama_1b_max_batch_none": 4, "llama_1b_max_batch_none_peak_memory_bytes": 120 * 2**30,
                       "llama_1b_max_batch_none_tokens_per_sec": 32768.0, "llama_1b_max_batch_none_mfu": 0.3}
    assert set(figures) == set(step.expected)
    cut = plan.Context("cuda", tmp_path / "cut", sys.executable)
    write_run(cut.folder(step.name), [llama_row(4, checkpointing="none")],
              verdict(4, complete=False, stopped="batch size 8: error: timed out after 75 s"))
    figures = step.read(cut, "")
    assert (figures["llama_1b_max_batch_none_at_least"], figures["failure"]) == \
        (4, "failed: the search did not end: batch size 8: error: timed out after 75 s")
    assert "llama_1b_max_batch_none" not in figures
    nothing = plan.Context("cpu", tmp_path / "nothing", sys.executable)
    write_run(nothing.folder(step.name), [llama_row(4, "oom", "none")], verdict(None))
    assert {name: value for name, value in step.read(nothing, "").items() if name != "info"} == \
        {"llama_1b_max_batch_none": 0}


def test_first_error_line_and_the_commands_a_reader_retypes() -> None:
    argparse_out = "usage: trainbench [-h] ...\ntrainbench: error: unrecognized arguments: --no-such-option\n"
    assert run.first_error(argparse_out, "") == "trainbench: error: unrecognized arguments: --no-such-option"
    traceback = "Traceback (most recent call last):\n  File x\nRuntimeError: CUDA out of memory\n"
    assert run.first_error(traceback, "") == "RuntimeError: CUDA out of memory"
    assert run.first_error("", "just a line\nlast line") == "last line"
    assert run.shown([sys.executable, f"{REPO}/benchmarks/x.py", "a b"]) == \
        "PYTHONPATH=source python3 benchmarks/x.py 'a b'"


def test_a_step_past_its_budget_is_stopped_and_a_failing_one_keeps_its_first_error_line(tmp_path: Path) -> None:
    ctx = plan.Context("cuda", tmp_path, sys.executable)  # "cuda": the GPU budget applies (5 s)
    # Real time is the point here. 5 s: a Python that prints at once has begun on a loaded machine too; 40 s: stopped
    # at its budget, not after its 60 s sleep, with room for a slow machine to end it.
    sleeper = plan.Step("sleeper", 1, 5, lambda c: [[c.python, "-c", "import time; print('begun', flush=True); "
                                                     "time.sleep(60)"]], lambda c, out: {"printed": out.strip()})
    started = time.monotonic()
    record = run.run_step(sleeper, ctx, set())
    assert (record["status"], record["figures"]) == ("timed out after 5 s", {"printed": "begun"})
    assert time.monotonic() - started < 40
    failing = plan.Step("failing", 1, 30, lambda c: [[c.python, "-c", "import sys; print('warming up'); "
                                                      "sys.exit('RuntimeError: CUDA error: out of memory')"]],
                        lambda c, out: {})
    assert run.run_step(failing, ctx, set())["status"] == "failed: RuntimeError: CUDA error: out of memory"


def test_a_failed_batch_size_fails_the_mode_step_and_keeps_the_others(tmp_path: Path) -> None:
    ctx = plan.Context("cuda", tmp_path, sys.executable)
    step = next(step for step in plan.steps() if step.name == "cuda_graph")
    run_dir = ctx.folder("cuda_graph") / "20260101-000000_torch_bf16_cuda"
    run_dir.mkdir(parents=True)
    (run_dir / "summary.json").write_text(json.dumps({"results": [
        {"batch_size": 32, "status": "ok", "samples_per_sec": 2600.0, "compile_s": 4.0},
        {"batch_size": 128, "status": "failed", "samples_per_sec": None, "error": "RuntimeError: capture failed"}]}))
    figures = step.read(ctx, "")
    assert figures == {"cuda_graph_b32": 2600.0, "compile_s_cuda_graph_b32": 4.0, "cuda_graph_b128": None,
                       "failure": "failed: batch 128: RuntimeError: capture failed"}


def test_a_part_already_in_the_folder_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "gpu_check.json").write_text(json.dumps({"parts": {"2": {}}, "steps": {}}))
    refused = subprocess.run([*RUN, "--part", "all", "--device", "cpu", "--output", str(tmp_path)], cwd=REPO,
                             capture_output=True, text=True, timeout=60)
    assert_one_line_error(refused, "part 2 is already in", "never overwritten")
    assert not (tmp_path / "logs").exists()
    unknown = subprocess.run([*RUN, "--part", "1", "--device", "cpu", "--output", str(tmp_path / "new"),
                              "--break", "nosuch"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert_one_line_error(unknown, "--break nosuch: no such step")
    unknown = subprocess.run([*RUN, "--part", "1", "--device", "cpu", "--output", str(tmp_path / "new"),
                              "--skip", "workload_bert", "--skip", "nosuch"], cwd=REPO, capture_output=True, text=True,
                             timeout=60)
    assert_one_line_error(unknown, "--skip nosuch: no such step")
    assert not (tmp_path / "new").exists()


# Steps left out of the smoke run. The workload steps are each `trainbench throughput --workload W`, which
# test_workloads_e2e.py runs for every workload; the two kept (an image and a sequence workload) hold the step's
# reading of both kinds of row. The variability step is `trainbench variability run`: test_variability_e2e.py runs
# it and reads its folder with this step's reader.
SKIPPED = ("variability", "workload_bert", "workload_gpt2", "workload_retinanet")


@pytest.mark.slow
@pytest.mark.timeout(1800)  # every command of the four parts, tiny: about 12 minutes on a loaded 2-core machine
def test_cpu_smoke_run_of_all_parts_records_every_step(tmp_path: Path) -> None:
    """All four parts on the CPU, with the eager step broken on purpose: it is recorded with its first error line
    and the next step still runs; GPU-only steps are "not run: no GPU", skipped ones "not run: --skip"; a second run
    into the folder is refused."""
    output = tmp_path / "check"
    skips = [word for name in SKIPPED for word in ("--skip", name)]
    done = subprocess.run([*RUN, "--part", "all", "--device", "cpu", "--output", str(output), "--break", "eager",
                           *skips], cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # 1: the broken step failed
    record = json.loads((output / "gpu_check.json").read_text())
    assert set(record["parts"]) == {"1", "2", "3", "4"}
    assert list(record["steps"]) == [step.name for step in plan.steps()]
    for step in plan.steps():
        status = record["steps"][step.name]["status"]
        if step.name == "eager":
            assert status.startswith("failed: trainbench") and "unrecognized arguments: --no-such-option" in status
        elif step.gpu_only:
            assert status == table.NOT_RUN_NO_GPU, (step.name, status)
        elif step.name in SKIPPED:
            assert status == run.NOT_RUN_SKIPPED and not record["steps"][step.name]["figures"], (step.name, status)
        else:
            assert status == "ok", (step.name, status, record["steps"][step.name].get("log"))
            figures = {name: value for name, value in record["steps"][step.name]["figures"].items()
                       if name.endswith(("_per_sec", "_of_synthetic", "ratio_b2", "_shards", "_images"))}
            assert all(isinstance(v, float | int) and v > 0 for v in figures.values()), (step.name, figures)
    assert record["steps"]["ncu"]["status"] == table.NOT_RUN_NO_GPU
    assert record["steps"]["data"]["status"] == "ok"  # the step after the broken one ran
    assert record["steps"]["loaders"]["figures"]["loader_cpu_of_synthetic"] > 0
    assert record["steps"]["telemetry"]["figures"]["sampler_ratio_b2"] > 0
    assert record["steps"]["environment"]["info"]["packages"]["torch"]
    for checkpointing in ("none", "full"):  # part 4: the tiny Llama at batch 2, its peak the worker's resident set
        figures = record["steps"][f"llama_1b_{checkpointing}"]["figures"]
        assert figures[f"llama_1b_{checkpointing}_tokens_per_sec_b2"] > 0
        assert figures[f"llama_1b_{checkpointing}_peak_memory_bytes_b2"] > 2**20
    assert record["steps"]["llama_1b_full"]["figures"]["llama_1b_full_hardware_flops_per_sample"] > 0
    # The search under a 1 MiB limit: batch 1 is over it, so nothing fits after one try.
    assert record["steps"]["llama_1b_max_batch"]["figures"] == {"llama_1b_max_batch_none": 0}
    assert record["steps"]["llama_1b_max_batch"]["info"]["tries"] == [[1, False, "over the limit"]]
    readme = (output / "README.md").read_text()
    for row in ("| sampler_ratio_b2 |", "| energy_over_sampled_b32 | not run: no GPU |", "| ncu_tensor_pct_b32 |",
                "| loader_gpu_of_synthetic | not run: no GPU |", "| torchrun_ratio_b2 |",
                "| resnet50_samples_per_sec |", "| llama_1b_none_tokens_per_sec_b2 |",
                "| llama_1b_full_mfu_b4 | not run: no GPU |", "| llama_1b_max_batch_none | 0 |"):
        assert row in readme, row
    assert "- eager: failed: trainbench: throughput: unrecognized arguments: --no-such-option" in readme
    again = subprocess.run([*RUN, "--part", "1", "--device", "cpu", "--output", str(output)], cwd=REPO,
                           capture_output=True, text=True, timeout=60)
    assert_one_line_error(again, "part 1 is already in")
    assert json.loads((output / "gpu_check.json").read_text()) == record
