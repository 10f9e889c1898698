"""benchmarks/gpu_check: the orchestration (goals, merge of parts, table, budgets) without subprocesses, and one CPU
smoke run of all three parts end to end (the check CI runs for lack of a GPU)."""

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
    for number in (1, 2, 3):
        assert sum(step.budget_s for step in plan.part_steps(number)) <= plan.PART_BUDGET_S <= 8.5 * 60
    ctx = plan.Context("cuda", tmp_path, "python3")
    ncu = next(step for step in plan.steps() if step.name == "ncu").commands(ctx)[0]
    assert ncu[ncu.index("--clock-control") + 1] == "none"
    assert {"--precision", "bf16", "--channels-last"} <= set(ncu)
    names = [step.name for step in plan.steps()]
    assert len(names) == len(set(names)) and {f"workload_{w}" for w in plan.WORKLOADS} <= set(names)


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
@pytest.mark.timeout(1800)  # every command of the three parts, tiny: about 12 minutes on a loaded 2-core machine
def test_cpu_smoke_run_of_all_parts_records_every_step(tmp_path: Path) -> None:
    """All three parts on the CPU, with the eager step broken on purpose: it is recorded with its first error line
    and the next step still runs; GPU-only steps are "not run: no GPU", skipped ones "not run: --skip"; a second run
    into the folder is refused."""
    output = tmp_path / "check"
    skips = [word for name in SKIPPED for word in ("--skip", name)]
    done = subprocess.run([*RUN, "--part", "all", "--device", "cpu", "--output", str(output), "--break", "eager",
                           *skips], cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # 1: the broken step failed
    record = json.loads((output / "gpu_check.json").read_text())
    assert set(record["parts"]) == {"1", "2", "3"}
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
    readme = (output / "README.md").read_text()
    for row in ("| sampler_ratio_b2 |", "| energy_over_sampled_b32 | not run: no GPU |", "| ncu_tensor_pct_b32 |",
                "| loader_gpu_of_synthetic | not run: no GPU |", "| torchrun_ratio_b2 |",
                "| resnet50_samples_per_sec |"):
        assert row in readme, row
    assert "- eager: failed: trainbench: throughput: unrecognized arguments: --no-such-option" in readme
    again = subprocess.run([*RUN, "--part", "1", "--device", "cpu", "--output", str(output)], cwd=REPO,
                           capture_output=True, text=True, timeout=60)
    assert_one_line_error(again, "part 1 is already in")
    assert json.loads((output / "gpu_check.json").read_text()) == record
