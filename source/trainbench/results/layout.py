"""The run-folder layout: the name of every file and folder a command writes for a run, once.

Writers and readers import these names; no other module spells them (a test scans the package for the literals).

- A throughput run's folder (``trainbench throughput``, a campaign's run): ``SUMMARY`` (the header and every batch
  size's result), ``SUMMARY_CSV`` (one row per batch size), ``STEPS`` (every step's time), ``ENV`` (the machine
  and software), ``LOGS``/ (each worker's ``batch_<X>.log``, ``.config.json``, ``.result.json``: ``worker_file``)
  and the pictures ``THROUGHPUT_PLOT``, ``MEMORY_PLOT`` (peak memory against batch size, where a result recorded it)
  and ``TELEMETRY_PLOT``.
- A profile's folder (``profile_folder``: ``profiled_data_<profiler>``): ``PROFILE`` in place of the summary,
  ``SUMMARY_CSV``, ``ENV``, ``LOGS``/ and ``PROFILE_PLOT``; the profiler's own files per batch size
  (``batch_file``).
- A campaign's folder: ``CAMPAIGN`` (its matrix), ``RESULTS`` (the table) and one folder per planned run,
  ``run_<repetition>_<config>`` followed by a marker: ``IN_PROGRESS`` while it runs, ``ABANDONED<k>`` after a
  kill, ``REFUSED`` after a refusal, ``FINISHED<return code>`` when it ended; each holds ``CAMPAIGN_RUN``. Only a
  finished one holds a result that counts: every reader leaves files under the others out (``in_unfinished_run``).
- A training run's folder: ``TRAIN_CONFIG``, ``METRICS`` (one line per epoch), ``FAILURES``, ``ENV``.
- A performance model's folder (``trainbench model``): ``MODEL``, ``MEASUREMENTS``, ``MODEL_PLOT``.
- The report (``trainbench report``): ``REPORT_PAGE`` and, beside it, ``RANKING_CSV``.
"""

from __future__ import annotations

import re
from pathlib import Path

# a throughput run's folder (a profile's shares ENV, SUMMARY_CSV and LOGS)
SUMMARY = "summary.json"
SUMMARY_CSV = "summary.csv"
STEPS = "steps.csv"
ENV = "env.json"
LOGS = "logs"
WORKER_LOG, WORKER_CONFIG, WORKER_RESULT = ".log", ".config.json", ".result.json"  # logs/batch_<X><suffix>
THROUGHPUT_PLOT, TELEMETRY_PLOT = "throughput.png", "telemetry.png"
MEMORY_PLOT = "memory.png"  # peak memory against batch size, beside throughput.png
MAX_BATCH = "max_batch.json"  # throughput --max-batch: the search's verdict (bench.max_batch)

# a profile's folder
PROFILE = "profile.json"
PROFILE_PLOT = "summary.png"
PROFILE_FOLDER_PREFIX = "profiled_data_"
NSYS_TIMELINE = ".timeline.json"  # batch_<X>.timeline.json: nsys' timeline summary of that batch size

# a campaign's folder
CAMPAIGN = "campaign.json"
CAMPAIGN_RUN = "campaign_run.json"
RESULTS = "results.csv"
RUN_PREFIX = "run_"
# A campaign's run folder while it runs, after a kill (moved aside, numbered), after a refusal: none holds a finished
# run. FINISHED is followed by the run's return code.
IN_PROGRESS, ABANDONED, REFUSED, FINISHED = "_inprogress", "_abandoned-", "_refused", "_ret_"
UNFINISHED_MARKERS = (IN_PROGRESS, ABANDONED, REFUSED)

# a training run's folder
TRAIN_CONFIG = "config.json"
METRICS = "metrics.jsonl"
FAILURES = "failures.jsonl"

# a performance model's folder
MODEL = "model.json"
MEASUREMENTS = "measurements.csv"
MODEL_PLOT = "model.png"

# the report (``trainbench report``): the page, and beside it every measured setting, ranked (the page's ranking)
REPORT_PAGE = "report.html"
RANKING_CSV = "ranking.csv"

RUN_FILES = (SUMMARY, SUMMARY_CSV, STEPS, ENV, PROFILE, CAMPAIGN, CAMPAIGN_RUN, RESULTS, TRAIN_CONFIG, METRICS,
             FAILURES, MODEL, MEASUREMENTS)  # the names no other module spells

_UNFINISHED_RUN = re.compile(rf"{RUN_PREFIX}.*({IN_PROGRESS}|{REFUSED}|{ABANDONED}\d+)")


def profile_folder(profiler: str) -> str:
    """The name of a profile's folder (numbered when taken, as every run folder)."""
    return f"{PROFILE_FOLDER_PREFIX}{profiler}"


def in_unfinished_run(path: Path, root: Path) -> bool:
    """Whether ``path`` (under ``root``) lies in an unfinished campaign run's folder: one named by the runner, the
    marker at the end (a user's folder that merely contains "_inprogress" is not one)."""
    return any(_UNFINISHED_RUN.fullmatch(part) for part in path.relative_to(root).parts[:-1])


def batch_file(folder: Path, batch_size: int, suffix: str = "") -> Path:
    """The file of one batch size in ``folder``: ``batch_<X><suffix>`` (``.csv``, ``.nsys-rep``, ``.log``...)."""
    return folder / f"batch_{batch_size}{suffix}"


def worker_file(run_dir: Path, batch_size: int, suffix: str) -> Path:
    """A worker's own file in a run folder: logs/batch_<X><suffix> (``WORKER_LOG``, ``WORKER_CONFIG``,
    ``WORKER_RESULT``)."""
    return batch_file(run_dir / LOGS, batch_size, suffix)
