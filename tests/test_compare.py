"""``trainbench compare``: run folders written by the results store, compared with Welch's t-test on their windows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import ttest_ind

from tests.conftest import assert_one_line_error, run_cli, run_main
from trainbench.bench.compare import (
    compare_runs,
    load_run,
    setting_differences,
    settings_sentence,
    step_line,
)
from trainbench.bench.throughput_run import ThroughputRun
from trainbench.results.records import BatchResult

HEADER = {"framework": "torch", "precision": "fp32", "image_size": 64, "data": "synthetic"}


def write_run(path: Path, batch: int, step_times: np.ndarray) -> Path:
    """A run of one window (its steps in steps.csv) and an oom batch size."""
    path.mkdir()
    run = ThroughputRun(path, HEADER)
    window = float(step_times.sum())
    row = {"batch_size": batch, "status": "ok", "samples_per_sec": batch * len(step_times) / window,
           "window_s": window, "timed_steps": len(step_times), "warmup_steps": 0}
    run.add(BatchResult.from_row(row), step_s=list(step_times))
    run.add(BatchResult.from_row({"batch_size": 4096, "status": "oom", "error": "out of memory"}))
    return path


def write_windows_run(path: Path, windows_by_batch: dict[int, list[float]], header: dict | None = None) -> Path:
    """A run with one ok result per batch size, timed in the given windows (samples/s each); no steps.csv."""
    path.mkdir()
    run = ThroughputRun(path, header or HEADER)
    for batch, rates in windows_by_batch.items():
        run.add(BatchResult.from_row({"batch_size": batch, "status": "ok", "samples_per_sec": float(np.mean(rates)),
                                      "windows": len(rates), "window_samples_per_sec": rates}))
    return path


def test_three_windows_a_side_that_never_overlap_are_significant_with_their_interval(tmp_path: Path) -> None:
    """The issue's case: +1,460 % with no overlap, which a rank test on 3 windows a side could not call (p >= 0.1)."""
    a = write_windows_run(tmp_path / "a", {8: [100.0, 102.0, 98.0]})
    b = write_windows_run(tmp_path / "b", {8: [1560.0, 1555.0, 1565.0]})
    row = compare_runs(a, b).iloc[0]
    assert row["change_pct"] == pytest.approx(1460.0)
    assert 1400.0 < row["change_low_pct"] < 1460.0 < row["change_high_pct"] < 1520.0
    assert row["p_value"] < 0.001 and row["significant"] is True
    assert (row["windows_a"], row["windows_b"]) == (3, 3)
    assert row["verdict"].startswith("B faster by 1460.0 % (95 % interval +14")


def test_one_window_a_side_is_no_verdict_and_says_how_many_are_needed(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    a = write_run(tmp_path / "a", 8, 0.100 + rng.normal(0, 0.002, 40))
    b = write_run(tmp_path / "b", 8, 0.125 + rng.normal(0, 0.002, 40))
    (b / "steps.csv").write_text("not,a\nsteps file\n")  # per-step times are no sample: never read
    table = compare_runs(a, b)
    assert list(table["batch_size"]) == [8]  # the oom batch size is not compared
    row = table.iloc[0]
    rate_a, rate_b = (json.loads((run / "summary.json").read_text())["results"][0]["samples_per_sec"] for run in (a, b))
    assert row["change_pct"] == pytest.approx(100 * (rate_b / rate_a - 1))
    assert row["significant"] is None and pd_missing(row["p_value"]) and pd_missing(row["change_low_pct"])
    assert (row["windows_a"], row["windows_b"]) == (1, 1)
    assert "no test: 1 and 1 windows" in row["verdict"] and "--windows 3 or more gives a verdict" in row["verdict"]


def pd_missing(value: object) -> bool:
    return value is None or value != value  # NaN


def test_each_batch_size_is_tested_on_its_own_windows_with_welchs_test(tmp_path: Path) -> None:
    """Batch 8 is unchanged and batch 32 is 20 % slower: each row's p is Welch's on that batch size's windows alone
    (a pooled sample of both batch sizes, whose rates differ fourfold, would give both rows one p-value)."""
    rng = np.random.default_rng(9)
    noise = rng.normal(0, 1.0, (4, 5))
    a = write_windows_run(tmp_path / "a", {8: list(100 + noise[0]), 32: list(400 + noise[1])})
    b = write_windows_run(tmp_path / "b", {8: list(100 + noise[2]), 32: list(320 + noise[3])})
    table = compare_runs(a, b).set_index("batch_size")
    assert list(table.index) == [8, 32]
    for batch, (first, second) in ((8, (0, 2)), (32, (1, 3))):
        centre = {8: (100, 100), 32: (400, 320)}[batch]
        assert table.loc[batch, "p_value"] == pytest.approx(float(ttest_ind(
            centre[0] + noise[first], centre[1] + noise[second], equal_var=False).pvalue))
    assert table.loc[8, "p_value"] > 0.05 and table.loc[8, "significant"] is False
    assert table.loc[32, "p_value"] < 1e-6 and table.loc[32, "significant"] is True
    assert table.loc[32, "change_pct"] == pytest.approx(-20.0, abs=1.0)
    assert table.loc[32, "verdict"].startswith("B slower by")
    assert table.loc[8, "verdict"].startswith("no clear difference")


@pytest.mark.parametrize("alpha", ["2", "-1", "0", "1", "nan", "inf", "x"])
def test_alpha_must_be_a_probability(tmp_path: Path, alpha: str) -> None:
    rng = np.random.default_rng(4)
    a = write_run(tmp_path / "a", 4, 0.05 + rng.normal(0, 0.001, 10))
    assert_one_line_error(run_main("compare", str(a), str(a), f"--alpha={alpha}"), "--alpha", alpha)


def test_alpha_decides_the_verdict_within_its_range(tmp_path: Path) -> None:
    a = write_windows_run(tmp_path / "a", {8: [100.0, 104.0, 96.0, 101.0]})
    b = write_windows_run(tmp_path / "b", {8: [103.0, 107.0, 99.0, 102.0]})
    p_value = compare_runs(a, b).iloc[0]["p_value"]
    assert 0.001 < p_value < 0.999
    assert compare_runs(a, b, alpha=min(0.999, p_value * 1.01)).iloc[0]["significant"] is True
    assert compare_runs(a, b, alpha=p_value * 0.99).iloc[0]["significant"] is False


ZEN4, ZEN3 = "AMD EPYC, family 25 model 17, AVX-512", "AMD EPYC, family 25 model 1, AVX2"


def _with_env(run: Path, gpu: str, framework: dict[str, object], python: str = "3.12.3", cpu: str = ZEN4) -> Path:
    (run / "env.json").write_text(json.dumps({"python": python, "framework": framework, "cpu_class": cpu,
                                              "gpu": {"driver": "580.1", "gpus": [{"name": gpu}]}}))
    return run


H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
TORCH = {"framework": "torch", "torch": "2.5.0", "cuda": "12.4", "cudnn": 90100, "devices": ["cpu", H100]}


def test_the_settings_sentence_counts_measured_settings_and_not_version_notations(tmp_path: Path) -> None:
    base = _with_env(write_windows_run(tmp_path / "base", {8: [100.0, 101.0, 99.0]}), H100, TORCH)
    notation = _with_env(write_windows_run(tmp_path / "notation", {8: [100.0, 101.0, 99.0]}), H100,
                         {**TORCH, "cuda": "12.4.0", "cudnn": "9"}, python="3.11.9", cpu=ZEN3)
    tf = _with_env(write_windows_run(tmp_path / "tf", {8: [90.0, 91.0, 89.0]}, {**HEADER, "framework": "tf"}),
                   H100, TORCH)
    two = _with_env(write_windows_run(tmp_path / "two", {8: [300.0, 301.0, 299.0]}, {**HEADER, "image_size": 32}),
                    A100, TORCH)
    run = {folder.name: load_run(folder) for folder in (base, notation, tf, two)}
    assert settings_sentence(run["base"], run["notation"]) == \
        "The runs differ in no setting: the change is the machine's or the code's."
    assert setting_differences(run["base"], run["notation"]) == [("cpu_class", ZEN4, ZEN3),  # environment only
                                                                 ("python", "3.12.3", "3.11.9")]
    assert settings_sentence(run["base"], run["tf"]) == "The runs differ in one setting: framework (A torch, B tf)."
    assert settings_sentence(run["base"], run["two"]) == ("These runs differ in 2 settings (image_size, gpus): a "
                                                          "change below is not the effect of any one of them.")


def test_a_default_and_the_same_value_given_are_one_setting(tmp_path: Path) -> None:
    """The header's "params" hold the shape settings as run; the model's options hold None for a default. BERT at
    its default 32 tokens against --seq-len 32 differs in nothing, against --seq-len 16 in the length only."""
    def bert(name: str, asked: int | None, ran: int) -> Path:
        header = {**HEADER, "workload": "bert", "image_size": None, "params": {"seq_len": ran},
                  "model": {"workload": "bert", "size": "tiny", "seq_len": asked, "num_classes": None}}
        return write_windows_run(tmp_path / name, {8: [100.0, 101.0, 99.0]}, header)

    default, given, shorter = load_run(bert("default", None, 32)), load_run(bert("given", 32, 32)), \
        load_run(bert("shorter", 16, 16))
    assert setting_differences(default, given) == []
    assert settings_sentence(default, shorter) == "The runs differ in one setting: model.seq_len (A 32, B 16)."


def step_run(path: Path, matmul: str | None, optimizer: str | None, recorded: str | None = None,
             **header: object) -> Path:
    """A run whose header records the step (format 5: model.matmul_precision, the optimizer's config) or, with
    None, does not (a file from before); ``recorded``: the optimizer as the results name it, with its
    implementation."""
    step: dict[str, object] = {}
    if matmul is not None:
        step["model"] = {"framework": "torch", "matmul_precision": matmul}
    if optimizer is not None:
        step["optimizer"] = {"name": optimizer, "momentum": 0.9, "base_learning_rate": 0.1}
    path.mkdir()
    run = ThroughputRun(path, {**HEADER, **step, **header})
    run.add(BatchResult.from_row({"batch_size": 8, "status": "ok", "samples_per_sec": 100.0, "windows": 3,
                                  "window_samples_per_sec": [100.0, 101.0, 99.0],
                                  **({"optimizer": recorded} if recorded else {})}))
    return path


def test_matmul_precision_and_the_optimizer_are_settings_that_make_runs_unlike(tmp_path: Path) -> None:
    base = load_run(step_run(tmp_path / "base", "highest", "sgd", "sgd (torch, foreach)"))
    high = load_run(step_run(tmp_path / "high", "high", "sgd", "sgd (torch, foreach)"))
    adamw = load_run(step_run(tmp_path / "adamw", "highest", "adamw", "adamw (torch, fused)"))
    both = load_run(step_run(tmp_path / "both", "high", "adamw", framework="tf"))
    assert settings_sentence(base, high) == "The runs differ in one setting: matmul_precision (A highest, B high)."
    assert settings_sentence(base, adamw) == "The runs differ in one setting: optimizer (A sgd, B adamw)."
    assert setting_differences(base, both) == [("framework", "torch", "tf"), ("matmul_precision", "highest", "high"),
                                               ("optimizer", "sgd", "adamw")]  # no model.matmul_precision twice
    assert step_line(base, base) == "step: matmul_precision highest in both; optimizer sgd (torch, foreach) in both"
    assert step_line(base, both) == \
        "step: matmul_precision A highest, B high; optimizer A sgd (torch, foreach), B adamw"


def test_a_run_from_before_format_5_has_an_unknown_step_never_the_default(tmp_path: Path) -> None:
    """A file without matmul_precision (or optimizer) is not "highest": not counted as a difference, nor as the
    same, and the sentence and the step line say so."""
    old = load_run(step_run(tmp_path / "old", None, None))
    new = load_run(step_run(tmp_path / "new", "highest", "sgd"))
    tf = load_run(step_run(tmp_path / "tf", "highest", "sgd", framework="tf"))
    assert setting_differences(old, new) == []
    assert settings_sentence(old, new) == (
        "The runs differ in no recorded setting, but A does not record matmul_precision or optimizer (a file from "
        "before format 5): the change may be the step's, the machine's or the code's.")
    assert settings_sentence(tf, old) == (
        "The runs differ in one setting: framework (A tf, B torch); B does not record matmul_precision or optimizer "
        "(a file from before format 5), which may differ too.")
    assert step_line(old, new) == ("step: matmul_precision A not recorded, B highest; optimizer A not recorded, B sgd "
                                   "(A: unknown, not taken as highest or the reference optimizer)")
    assert step_line(old, old) is None  # two runs from before: compared as they always were
    assert settings_sentence(old, old) == "The runs differ in no setting: the change is the machine's or the code's."


def format_6_run(path: Path, recompute: str | None, shard: str | None, processes: int = 2) -> Path:
    """A run of format 5's step settings and, where given, format 6's in its model (None: a file from before format
    6, which has neither key)."""
    model = {name: value for name, value in (("activation_checkpointing", recompute), ("shard", shard))
             if value is not None}
    return step_run(path, "highest", "adamw", model={"framework": "torch", "matmul_precision": "highest", **model},
                    launch={"processes_per_node": processes, "nodes": 1})


def test_recomputation_and_the_shard_are_step_settings_that_make_runs_unlike(tmp_path: Path) -> None:
    ddp = load_run(format_6_run(tmp_path / "ddp", "none", "ddp"))
    fsdp = load_run(format_6_run(tmp_path / "fsdp", "none", "fsdp"))
    full = load_run(format_6_run(tmp_path / "full", "full", "fsdp"))
    assert settings_sentence(ddp, fsdp) == "The runs differ in one setting: shard (A ddp, B fsdp)."
    assert setting_differences(ddp, full) == [("activation_checkpointing", "none", "full"),
                                              ("shard", "ddp", "fsdp")]  # no model.shard beside it
    assert step_line(ddp, fsdp) == \
        "step: matmul_precision highest in both; optimizer adamw in both; shard A ddp, B fsdp"
    assert step_line(fsdp, full) == ("step: matmul_precision highest in both; optimizer adamw in both; "
                                     "activation_checkpointing A none, B full; shard fsdp in both")
    assert step_line(ddp, ddp) == "step: matmul_precision highest in both; optimizer adamw in both"  # the defaults


def test_a_run_from_before_format_6_ran_without_recomputation_and_with_replicas(tmp_path: Path) -> None:
    """A file without activation_checkpointing and shard ran none and DDP (the suite had nothing else): known, so it
    is the same step as a format-6 run of the defaults, and unlike one of FSDP, rather than unknown."""
    old = load_run(format_6_run(tmp_path / "old", None, None))
    new = load_run(format_6_run(tmp_path / "new", "none", "ddp"))
    fsdp = load_run(format_6_run(tmp_path / "fsdp", "full", "fsdp"))
    assert setting_differences(old, new) == []
    assert settings_sentence(old, new) == "The runs differ in no setting: the change is the machine's or the code's."
    assert settings_sentence(old, fsdp) == ("These runs differ in 2 settings (activation_checkpointing, shard): a "
                                            "change below is not the effect of any one of them.")
    assert step_line(old, fsdp) == ("step: matmul_precision highest in both; optimizer adamw in both; "
                                    "activation_checkpointing A none, B full; shard A ddp, B fsdp")
    before_5 = load_run(step_run(tmp_path / "before_5", None, None))
    assert step_line(before_5, before_5) is None  # nothing recorded, nothing but the defaults: no line
    assert step_line(before_5, fsdp) == (
        "step: matmul_precision A not recorded, B highest; optimizer A not recorded, B adamw; activation_checkpointing "
        "A none, B full; shard A ddp, B fsdp (A: unknown, not taken as highest or the reference optimizer)")
    assert settings_sentence(before_5, fsdp).startswith("These runs differ in 2 settings (activation_checkpointing, "
                                                        "shard); A does not record matmul_precision or optimizer")


def test_the_cli_prints_the_step_line_below_the_settings(tmp_path: Path) -> None:
    a = step_run(tmp_path / "a", "highest", "sgd")
    b = step_run(tmp_path / "b", "high", "adamw")
    lines = run_main("compare", str(a), str(b)).stdout.splitlines()
    assert lines[:4] == ["These runs differ in 2 settings (matmul_precision, optimizer): a change below is not the "
                         "effect of any one of them.", "  matmul_precision: A highest, B high",
                         "  optimizer: A sgd, B adamw", "step: matmul_precision A highest, B high; optimizer A sgd, "
                         "B adamw"]
    assert lines[4].split()[:3] == ["batch", "A", "images/s"]
    fsdp = format_6_run(tmp_path / "fsdp", "none", "fsdp")
    lines = run_main("compare", str(format_6_run(tmp_path / "ddp", "none", "ddp")), str(fsdp)).stdout.splitlines()
    assert lines[:2] == ["The runs differ in one setting: shard (A ddp, B fsdp).",
                         "step: matmul_precision highest in both; optimizer adamw in both; shard A ddp, B fsdp"]


def test_the_cli_prints_the_sentence_the_table_and_each_verdict(tmp_path: Path) -> None:
    a = _with_env(write_windows_run(tmp_path / "a", {8: [100.0, 102.0, 98.0], 16: [180.0, 181.0]}), A100, TORCH)
    b = _with_env(write_windows_run(tmp_path / "b", {8: [1560.0, 1555.0, 1565.0], 16: [181.0, 182.0]},
                                    {**HEADER, "image_size": 224}), H100, {**TORCH, "torch": "2.6.0"})
    result = run_main("compare", str(a), str(b))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == ("These runs differ in 2 settings (image_size, gpus): a change below is not the effect of any "
                        "one of them.")
    assert lines[1:4] == ["  image_size: A 64, B 224", f"  gpus: A {A100}, B {H100}",
                          "environment differs: version of torch (A 2.5.0, B 2.6.0)"]
    assert lines[4].split() == ["batch", "A", "images/s", "B", "images/s", "change", "[95", "%", "interval]", "p",
                                "windows", "A/B"]
    row = compare_runs(a, b).iloc[0]
    assert lines[5].split()[:5] == ["8", "100.0", "1560", "+1460.0", "%"]
    assert lines[5].split()[5:7] == [f"[{row['change_low_pct']:+.1f},", f"{row['change_high_pct']:+.1f}]"]
    assert lines[5].split()[-2:] == [f"{row['p_value']:.2g}", "3/3"]
    assert lines[7] == f"batch 8: {row['verdict']}" and lines[7].startswith("batch 8: B faster by 1460.0 %")
    assert lines[8].startswith("batch 16: no clear difference: +0.6 %") and "only 2 windows a side" in lines[8]
    assert len(lines) == 9


@pytest.mark.slow
def test_cli_prints_a_verdict_and_refuses_a_non_run(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    a = write_run(tmp_path / "a", 4, 0.05 + rng.normal(0, 0.001, 30))
    b = write_run(tmp_path / "b", 4, 0.04 + rng.normal(0, 0.001, 30))
    result = run_cli("compare", str(a), str(b))  # one case in a real process
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "The runs differ in no setting: the change is the machine's or the code's."
    assert lines[-1].startswith("batch 4: +2") and "no test: 1 and 1 windows" in lines[-1]
    assert_one_line_error(run_main("compare", str(a), str(tmp_path / "missing")), "missing", "not a throughput run")


@pytest.mark.slow
@pytest.mark.parametrize(("summary", "fragment"), [
    ([1, 2, 3], "no list of results"),
    ({"results": "none"}, "no list of results"),
    ({"results": [7]}, "results[0] is not an object"),
    ({"results": [{"batch_size": "4", "status": "ok", "samples_per_sec": 1.0}]}, "results[0].batch_size is '4'"),
    ({"results": [{"batch_size": 4, "status": "ok", "samples_per_sec": "fast"}]}, "samples_per_sec is 'fast'"),
    ({"results": [{"batch_size": 4, "status": "ok", "samples_per_sec": -3}]}, "samples_per_sec is -3"),
    ({"results": [{"batch_size": 4, "status": 1}]}, "results[0].status is 1"),
    ({"results": [{"batch_size": 4, "status": "ok", "samples_per_sec": 2.0, "window_samples_per_sec": [1, "x"]}]},
     "results[0].window_samples_per_sec is [1, 'x']"),
])
def test_a_summary_of_the_wrong_shape_is_one_line_naming_the_file(tmp_path: Path, summary: object,
                                                                  fragment: str) -> None:
    rng = np.random.default_rng(7)
    a = write_run(tmp_path / "a", 4, 0.05 + rng.normal(0, 0.001, 10))
    bad = write_run(tmp_path / "bad", 4, 0.05 + rng.normal(0, 0.001, 10))
    (bad / "summary.json").write_text(json.dumps(summary))
    assert_one_line_error(run_main("compare", str(a), str(bad)), str(bad / "summary.json"), fragment)
    (bad / "summary.json").write_text("{not json")
    assert_one_line_error(run_main("compare", str(a), str(bad)), str(bad / "summary.json"), "JSONDecodeError")


def test_runs_whose_batch_sizes_all_failed_say_so(tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    a = write_run(tmp_path / "a", 4, 0.05 + rng.normal(0, 0.001, 10))
    failed = tmp_path / "failed"
    failed.mkdir()
    run = ThroughputRun(failed, HEADER)
    run.add(BatchResult.from_row({"batch_size": 4, "status": "oom", "error": "out of memory"}))
    run.add(BatchResult.from_row({"batch_size": 8, "status": "error", "error": "timed out after 5 s"}))
    assert not (failed / "steps.csv").exists()
    result = run_main("compare", str(a), str(failed))
    assert result.returncode == 1 and result.stderr == ""
    assert result.stdout.splitlines()[-1] == ("no batch size was measured successfully in both runs "
                                              "(A: 4 ok, 4096 oom; B: 4 oom, 8 error)")
