"""``trainbench report DIR... [-o report.html]``: one self-contained HTML page of everything under the folders.

Finds, through the results model and the suite's own readers: throughput runs (``summary.json``), profiles
(``profile.json``), campaigns (``campaign.json`` with its run folders), variability folders (``variability.json``),
models (``model.json``) and training runs (``metrics.jsonl``); the page itself is ``report/html.py``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from trainbench.analysis.variability import load_runs, per_gpu
from trainbench.bench.compare import compare_runs
from trainbench.campaign.table import campaign_summary, campaign_table
from trainbench.cli.options import path_text
from trainbench.errors import UsageError
from trainbench.report.html import ReportData, Run, render
from trainbench.results.files import write_text_atomic
from trainbench.results.store import read_summary
from trainbench.telemetry.schema import VARIABILITY_FILE

OUTPUT = "report.html"
_UNFINISHED = ("_inprogress", "_abandoned-", "_refused")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report", help="one self-contained HTML page of runs, campaigns, profiles, models and training",
        description="Write one HTML file (no network, images embedded) with everything measured under the folders: "
        "environment, throughput with its spread, failures, input-bound verdicts, campaigns and scaling efficiency, "
        "GPU telemetry, core utilization, nsys timelines, GPU variability, comparisons, performance models and "
        "training curves; a section without data says why. The last line printed is the file.")
    parser.add_argument("dirs", nargs="+", type=path_text, metavar="DIR")
    parser.add_argument("-o", "--output", type=path_text, default=OUTPUT, metavar="FILE",
                        help=f"the HTML file (default ./{OUTPUT}; an existing file is not overwritten: -1, -2... "
                        "are added)")
    parser.set_defaults(run=run)


def _files(folders: list[Path], name: str) -> list[Path]:
    found = []
    for folder in folders:
        found += [path for path in sorted(folder.rglob(name))
                  if not any(marker in part for part in path.relative_to(folder).parts for marker in _UNFINISHED)]
    return sorted(set(found))


def _run(path: Path) -> Run:
    summary = read_summary(path, "throughput run or profile")
    pictures = sorted(path.parent.glob("*.png"))
    return Run(path.parent, summary.header, [result.to_row() for result in summary.results], pictures)


def _environment(folders: list[Path]) -> dict[str, Any] | None:
    for path in _files(folders, "env.json"):
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
    return None


def _comparisons(data: ReportData) -> None:
    if len(data.runs) < 2:
        return
    first, second = data.runs[0], data.runs[1]
    try:
        frame = compare_runs(first.path, second.path)
    except UsageError as error:
        data.comparison_note = f"The first two runs cannot be compared: {error}"
        return
    data.comparisons.append((f"{first.path.name} against {second.path.name}", frame))


def _json_lines(path: Path) -> list[dict[str, Any]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue  # a line cut by a crash: the epochs before it still count
    return rows


def gather(folders: list[Path]) -> ReportData:
    for folder in folders:
        if not folder.is_dir():
            raise UsageError(f"{folder}: not a folder ({'a file' if folder.exists() else 'no such folder'})")
    data = ReportData([str(folder) for folder in folders], environment=_environment(folders))
    # a campaign's or a variability study's runs are shown by their own sections, not run by run
    grouped = [path.parent for name in ("campaign.json", VARIABILITY_FILE) for path in _files(folders, name)]
    for path in _files(folders, "summary.json"):
        if not any(root in path.parents for root in grouped):
            data.runs.append(_run(path))
    data.profiles = [_run(path) for path in _files(folders, "profile.json")]
    for path in _files(folders, "campaign.json"):
        data.campaigns.append((path.parent, campaign_summary(campaign_table(path.parent))))
    for path in _files(folders, VARIABILITY_FILE):
        data.variability.append((path.parent, per_gpu(load_runs(path.parent))))
    for path in _files(folders, "model.json"):
        data.models.append((path.parent, json.loads(path.read_text(encoding="utf-8"))))
    data.trainings = [(path.parent, _json_lines(path)) for path in _files(folders, "metrics.jsonl")]
    _comparisons(data)
    return data


def _nothing(data: ReportData) -> bool:
    return not (data.runs or data.profiles or data.campaigns or data.variability or data.models or data.trainings)


def _free(path: Path) -> Path:
    """The path itself, or path-1, path-2... when taken: a report is never overwritten."""
    candidate, number = path, 0
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{path.stem}-{number}{path.suffix}")
    return candidate


def run(args: argparse.Namespace) -> int:
    folders = [Path(folder) for folder in args.dirs]
    data = gather(folders)
    if _nothing(data):
        raise UsageError(f"{', '.join(map(str, folders))}: nothing to report (no run, profile, campaign, "
                         "variability folder, model or training run)")
    output = _free(Path(args.output))
    write_text_atomic(output, render(data))
    print(output)
    return 0
