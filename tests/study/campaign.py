"""``trainbench campaign run|summary`` under bad, odd and hostile input.

The world holds one small matrix (2 experiments x 2 repetitions x batch sizes 1 and 2, on the CPU) and campaign
folders laid out as the runner leaves them: ``campaign.json`` written by ``runner.open_campaign`` itself, finished run
folders with ``campaign_run.json`` and a ``summary.json`` written by ``ThroughputRun`` (then one value edited where a
case needs a bad one), and ``results.csv`` built by ``write_campaign_table``. Images/s are chosen so that the right
median is known: 100 and 120 per configuration and batch size (median 110.00); a bad value must leave it at the
good one alone (100.00), never fold into it.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

from tests.study import StudyCase
from tests.test_campaign_slurm import TINY_MATRIX
from trainbench.bench.stats import summarize_windows
from trainbench.bench.throughput_run import ThroughputRun
from trainbench.bench.timing import Window
from trainbench.campaign.matrix import Matrix, load_matrix
from trainbench.campaign.runner import PlannedRun, open_campaign, plan
from trainbench.campaign.table import write_campaign_table
from trainbench.results.files import write_json_atomic
from trainbench.results.records import BatchResult, Status

MATRIX = TINY_MATRIX  # two experiments (seed 0 and 1) x 2 repeats, batch sizes 1 and 2
CONFIG = "torch-fp32-img64-cpu-cls4-seed0"  # experiment 0's config string; runs 0 (repetition 0) and 2 (repetition 1)
RATES = {0: 100.0, 1: 120.0}  # images/s by repetition, every batch size (100 for any other repetition)
_HELD: list[int] = []  # lock descriptors standing for another process's claim, held for the whole session


def _values(batch_size: int, rate: float) -> dict[str, Any]:
    """A batch size's values as the sweep computes them, from two equal steps at ``rate`` images/s."""
    step = batch_size / rate
    return summarize_windows(batch_size, [Window((step,), (step, step), 2 * step)])


def _finished(folder: Path, matrix: Matrix, run: PlannedRun, code: int = 0, failed: tuple[int, ...] = (),
              fingerprint: str | None = None) -> Path:
    """A finished run's folder as the runner leaves it (its campaign_run.json, a throughput sweep's files)."""
    path = folder / f"{run.stem}_ret_{code}"
    path.mkdir()
    write_json_atomic(path / "campaign_run.json", {
        "run": run.number, "repetition": run.repetition, "experiment": run.experiment.index,
        "config": run.experiment.name, "values": run.experiment.values,
        "fingerprint": fingerprint or matrix.fingerprint()})
    store = ThroughputRun(path, {"framework": "torch", "precision": "fp32", "image_size": 64, "device": "cpu"})
    for size in matrix.batch_sizes:
        if size in failed:
            store.add(BatchResult.failed(size, Status.OOM, "RuntimeError: out of memory"))
        else:
            store.add(BatchResult(size, Status.OK, None, _values(size, RATES.get(run.repetition, 100.0))),
                      warmup_s=[0.1], step_s=[0.05, 0.05])
    return path


def _campaign(world: Path, name: str, matrix: Matrix, runs: list[PlannedRun] | None = None) -> Path:
    """A campaign folder of ``matrix`` whose ``runs`` (default: every planned run) finished, with results.csv."""
    folder = world / name
    planned = plan(matrix)
    open_campaign(folder, matrix, None, planned, replace=False)
    for run in planned if runs is None else runs:
        _finished(folder, matrix, run)
    return folder


def _edit(summary: Path, batch_size: int, field: str, text: str) -> None:
    """One value of a real summary.json replaced by ``text`` as written (NaN, Infinity, 1e999: what json writes
    and reads back but no run measures)."""
    data = json.loads(summary.read_text())
    index = next(i for i, row in enumerate(data["results"]) if row["batch_size"] == batch_size)
    data["results"][index][field] = "__EDITED__"
    summary.write_text(json.dumps(data, indent=2).replace('"__EDITED__"', text))


def _with_bad_value(world: Path, matrix: Matrix, name: str, field: str, text: str) -> None:
    """A whole campaign whose repetition 1 of experiment 0, batch size 2, holds ``text`` as ``field``."""
    folder = _campaign(world, name, matrix)
    _edit(folder / f"run_1_{CONFIG}_ret_0" / "summary.json", 2, field, text)
    write_campaign_table(folder)


def build(world: Path) -> None:
    (world / "m.yaml").write_text(MATRIX)
    matrix = load_matrix(world / "m.yaml")
    runs = plan(matrix)
    write_campaign_table(_campaign(world, "done", matrix))
    for name, field, text in (("nan", "samples_per_sec", "NaN"), ("inf", "samples_per_sec", "Infinity"),
                              ("overflow", "samples_per_sec", "1e999"), ("negative", "samples_per_sec", "-120.0"),
                              ("text", "samples_per_sec", '"fast"'), ("boolean", "samples_per_sec", "true"),
                              ("window", "window_samples_per_sec", "[120.0, NaN]"),
                              ("step_time", "step_time_median_s", "-0.01")):
        _with_bad_value(world, matrix, name, field, text)
    # every result of one campaign invalid: no statistic at all, and the closing line names both
    folder = _campaign(world, "all_invalid", matrix, runs[:1])
    for size in (1, 2):
        _edit(folder / f"{runs[0].stem}_ret_0" / "summary.json", size, "samples_per_sec", "NaN")
    # a second finished folder of run 2 (a failure at batch size 2), newer: it counts, the older one is named
    folder = _campaign(world, "duplicate", matrix)
    newer = _finished(folder, matrix, runs[2], code=1, failed=(2,))
    old = folder / f"{runs[2].stem}_ret_0"
    for path, when in ((old / "summary.json", 1_000_000_000), (newer / "summary.json", 1_000_000_100)):
        os.utime(path, (when, when))
    # a folder whose matrix was replaced: campaign.json of the new matrix (warmup 3), the old matrix's runs kept
    (world / "m_warmup3.yaml").write_text(MATRIX.replace("warmup: 1", "warmup: 3"))
    other = load_matrix(world / "m_warmup3.yaml")
    folder = _campaign(world, "replaced", matrix)
    _replace(folder, matrix, other)
    # run 0 claimed by another process (a requeued array task whose first attempt still runs): this test process
    # holds the run's lock for the session through a descriptor of its own, as that process would
    folder = _campaign(world, "busy", matrix, runs[1:])
    descriptor = os.open(folder / f".{runs[0].stem}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(descriptor, fcntl.LOCK_EX)
    _HELD.append(descriptor)
    (world / "job.sh").write_text("#!/bin/bash\necho an earlier script\n")
    (world / "a_folder").mkdir()
    (world / "dangling.sh").symlink_to(world / "nowhere")
    (world / "not_a_folder").write_text("a file\n")
    (world / "empty").mkdir()


def _replace(folder: Path, old: Matrix, new: Matrix) -> None:
    """campaign.json as ``--replace-matrix`` leaves it (written by hand: open_campaign itself refuses this new plan,
    whose names the old runs hold), and one finished run of the new matrix whose name no old run holds (repetition
    2: the old plan has none)."""
    record = json.loads((folder / "campaign.json").read_text())
    write_json_atomic(folder / "campaign.json", {**record, "matrix": new.source, "fingerprint": new.fingerprint(),
                                                 "replaced": [old.fingerprint()]})
    run = PlannedRun(4, 2, plan(new)[0].experiment)
    _finished(folder, new, run, fingerprint=new.fingerprint())


def _summary(name: str, *named: str, absent: tuple[str, ...] = (), kind: str = "silent-wrong") -> StudyCase:
    return StudyCase(f"summary_{name}", ("campaign", "summary", f"{{w}}/{name}"), named, exit=0, absent=absent,
                     kind=kind)


_INVALID = "1 invalid result left out"
_ONLY_GOOD = "100.00  100.00  100.00"  # median, min, max of the edited row: the good repetition alone

CASES: list[StudyCase] = [
    # --- invalid measured values: shown as invalid, left out of every statistic, counted apart -----------------
    _summary("done", "all 8 results ok", "110.00", absent=("invalid result",), kind="baseline"),
    *(_summary(name, _INVALID, f"{{w}}/{name}/run_1_{CONFIG}_ret_0/summary.json: results[1].{field} is {shown}",
               _ONLY_GOOD, "7 of 8 results ok")
      for name, field, shown in (("nan", "samples_per_sec", "nan"), ("inf", "samples_per_sec", "inf"),
                                 ("overflow", "samples_per_sec", "inf"), ("negative", "samples_per_sec", "-120.0"),
                                 ("text", "samples_per_sec", "'fast'"), ("boolean", "samples_per_sec", "True"),
                                 ("window", "window_samples_per_sec", "[120.0, nan]"),
                                 ("step_time", "step_time_median_s", "-0.01"))),
    _summary("all_invalid", "2 invalid results left out", "0 of 2 results ok",
             "{w}/all_invalid/run_0_" + CONFIG + "_ret_0/summary.json: results[0].samples_per_sec is nan"),
    # --- a second finished folder of one planned run: counted once, the other named ----------------------------
    _summary("duplicate", f"run_1_{CONFIG}_ret_0 left out: a second finished folder of the run in "
             f"run_1_{CONFIG}_ret_1", "1 of 8 results failed", absent=("of 9 results",)),
    # --- a replaced matrix: the table answers the matrix in campaign.json only ----------------------------------
    _summary("replaced", "4 run folders of another matrix than campaign.json's left out", "all 2 results ok",
             absent=("110.00",)),
    StudyCase("run_replace_matrix_reusing_old_run_names",
              ("campaign", "run", "{w}/m.yaml", "warmup=3", "--replace-matrix", "--output", "{w}/done"),
              ("{w}/done/run_0_", "the matrix this folder held before", "choose another --output"),
              kind="silent-wrong"),
    StudyCase("run_replace_matrix_only_reusing_a_name",
              ("campaign", "run", "{w}/m.yaml", "seed=1", "repeats=1", "--replace-matrix", "--output", "{w}/done"),
              ("{w}/done/run_0_torch-fp32-img64-cpu-cls4-seed1_ret_0", "held before"), kind="silent-wrong"),
    StudyCase("run_another_matrix_without_replace",
              ("campaign", "run", "{w}/m_warmup3.yaml", "--output", "{w}/done"),
              ("{w}/done/campaign.json", "another matrix", "--replace-matrix"), kind="silent-wrong"),
    StudyCase("run_everything_finished_changes_nothing",
              ("campaign", "run", "{w}/m.yaml", "--output", "{w}/done"), ("ran 0,", "skipped 4"), exit=0,
              writes=True, kind="resume"),
    StudyCase("run_replaced_folder_with_its_old_matrix_again",
              ("campaign", "run", "{w}/m.yaml", "--output", "{w}/replaced"),
              ("{w}/replaced/campaign.json", "another matrix"), kind="silent-wrong"),
    # --- a requeued task: the run is claimed by a live process ---------------------------------------------------
    StudyCase("run_only_a_run_another_process_runs",
              ("campaign", "run", "{w}/m.yaml", "--output", "{w}/busy", "--only", "0"),
              (f"{{w}}/busy/run_0_{CONFIG}_inprogress", "run 0 is running in another process"), kind="traceback"),
    StudyCase("run_all_while_another_process_runs_one",
              ("campaign", "run", "{w}/m.yaml", "--output", "{w}/busy"),
              ("run 0 is running in another process",), kind="traceback"),
    # --- --emit-slurm never overwrites -----------------------------------------------------------------------------
    StudyCase("emit_slurm_over_the_matrix", ("campaign", "run", "{w}/m.yaml", "--output", "{w}/new",
                                             "--emit-slurm", "{w}/m.yaml"),
              ("--emit-slurm {w}/m.yaml", "never overwritten"), kind="overwrite"),
    StudyCase("emit_slurm_over_a_script", ("campaign", "run", "{w}/m.yaml", "--output", "{w}/new",
                                           "--emit-slurm", "{w}/job.sh"),
              ("{w}/job.sh", "a file of that name exists"), kind="overwrite"),
    StudyCase("emit_slurm_onto_a_folder", ("campaign", "run", "{w}/m.yaml", "--output", "{w}/new",
                                           "--emit-slurm", "{w}/a_folder"),
              ("{w}/a_folder", "a folder of that name exists"), kind="overwrite"),
    StudyCase("emit_slurm_onto_a_dangling_link", ("campaign", "run", "{w}/m.yaml", "--output", "{w}/new",
                                                  "--emit-slurm", "{w}/dangling.sh"),
              ("{w}/dangling.sh", "never overwritten"), kind="overwrite"),
    StudyCase("emit_slurm_into_a_missing_folder", ("campaign", "run", "{w}/m.yaml", "--output", "{w}/new",
                                                   "--emit-slurm", "{w}/no/such/job.sh"),
              ("--emit-slurm {w}/no/such/job.sh", "no such folder"), kind="odd-path"),
    StudyCase("emit_slurm_for_a_folder_of_another_matrix",
              ("campaign", "run", "{w}/m_warmup3.yaml", "--output", "{w}/done", "--emit-slurm", "{w}/new.sh"),
              ("{w}/done/campaign.json", "another matrix"), kind="silent-wrong"),
    StudyCase("emit_slurm_writes_a_new_file",
              ("campaign", "run", "{w}/m.yaml", "--output", "{w}/done", "--emit-slurm", "{w}/fresh.sh"),
              ("wrote {w}/fresh.sh: 4 array tasks",), exit=0, writes=True, kind="baseline"),
    StudyCase("emit_slurm_with_an_empty_container",
              ("campaign", "run", "{w}/m.yaml", "--output", "{w}/new", "--emit-slurm", "{w}/x.sh", "--container=",),
              ("--container", "empty image name"), kind="silent-option"),
    # --- options that would do nothing ---------------------------------------------------------------------------
    StudyCase("container_without_emit_slurm",
              ("campaign", "run", "{w}/m.yaml", "--output", "{w}/new", "--container", "img.sif"),
              ("--container img.sif", "only used with --emit-slurm"), kind="silent-option"),
    StudyCase("container_with_dry_run",
              ("campaign", "run", "{w}/m.yaml", "--dry-run", "--container", "img.sif"),
              ("--container img.sif", "--emit-slurm"), kind="silent-option"),
    StudyCase("emit_slurm_with_only",
              ("campaign", "run", "{w}/m.yaml", "--output", "{w}/new", "--emit-slurm", "{w}/x.sh", "--only", "1"),
              ("--emit-slurm and --only", "sbatch --array"), kind="silent-option"),
    StudyCase("emit_slurm_with_dry_run",
              ("campaign", "run", "{w}/m.yaml", "--dry-run", "--emit-slurm", "{w}/x.sh"),
              ("--emit-slurm and --dry-run",), kind="silent-option"),
    # --- odd folders -----------------------------------------------------------------------------------------------
    StudyCase("summary_of_a_missing_folder", ("campaign", "summary", "{w}/nowhere"),
              ("{w}/nowhere", "no such folder"), kind="odd-path"),
    StudyCase("summary_of_a_file", ("campaign", "summary", "{w}/not_a_folder"),
              ("{w}/not_a_folder", "not a campaign folder (a file)"), kind="odd-path"),
    StudyCase("summary_of_an_empty_folder", ("campaign", "summary", "{w}/empty"),
              ("{w}/empty", "no finished run"), kind="odd-path"),
    StudyCase("run_into_a_file", ("campaign", "run", "{w}/m.yaml", "--output", "{w}/not_a_folder"),
              ("{w}/not_a_folder", "not a folder"), kind="odd-path"),
    StudyCase("only_out_of_the_plan", ("campaign", "run", "{w}/m.yaml", "--output", "{w}/new", "--only", "4"),
              ("--only 4", "runs 0 to 3"), kind="bad-value"),
    # --- a real run (ResNet-50 on the CPU): one planned run into a fresh folder -----------------------------------
    StudyCase("run_one_planned_run", ("campaign", "run", "{w}/m.yaml", "--output", "{w}/fresh", "--only", "0",
                                      "batch_size=1"),
              ("ran 1, 0 with a failed batch size", "{w}/fresh/results.csv"), exit=0, writes=True,
              env={"CUDA_VISIBLE_DEVICES": ""}, kind="baseline", slow=True),
]
