"""``trainbench compare`` between two runs, and the ranking of ``trainbench report``, on issue 42's cases: a setting
left at its default is the value it ran at (never None, never a difference); a derived figure that cannot be
measured (an MFU above 1, a tokens/s that does not follow from samples/s) is an invalid value, named; a run folder
whose name is a spreadsheet formula is reported.

Runs are written by the suite's own writers (``ThroughputRun`` through ``tests/test_compare.py``'s
``write_windows_run`` and ``tests/test_report_html.py``'s ``throughput_run``) with the headers of
``tests/test_compare.py`` and ``tests/test_results_derived.py``, then one value edited where a case needs a bad one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.study import StudyCase
from tests.test_compare import HEADER, write_windows_run
from tests.test_csv_cells import HOSTILE
from tests.test_report_html import throughput_run
from tests.test_results_derived import BERT

RATES = [100.0, 101.0, 99.0]  # samples/s of three windows, every batch size 8


def _bert(world: Path, name: str, asked: int | None, ran: int) -> None:
    """A tiny BERT run asked for ``--seq-len asked`` (None: left at its default) that ran at ``ran`` tokens."""
    header = {**HEADER, "workload": "bert", "image_size": None, "params": {"seq_len": ran},
              "model": {"workload": "bert", "size": "tiny", "seq_len": asked, "num_classes": None}}
    write_windows_run(world / name, {8: RATES}, header)


def _resnet(world: Path, name: str, asked: int | None, ran: int) -> None:
    """A tiny ResNet-50 run asked for ``--num-classes asked`` (None: the tiny size's default) that ran ``ran``."""
    header = {**HEADER, "workload": "resnet50", "params": {"image_size": 64, "num_classes": ran},
              "model": {"workload": "resnet50", "size": "tiny", "num_classes": asked}}
    write_windows_run(world / name, {8: RATES}, header)


def _derived(world: Path, name: str, **values: Any) -> None:
    """A BERT run at 32 tokens whose first result also holds ``values`` (figures derived from the rate)."""
    run = write_windows_run(world / name, {8: RATES}, BERT)
    summary = run / "summary.json"
    data = json.loads(summary.read_text())
    data["results"][0] |= values
    summary.write_text(json.dumps(data))


def build(world: Path) -> None:
    _bert(world, "bert_default", None, 32)
    _bert(world, "bert_32", 32, 32)
    _bert(world, "bert_16", 16, 16)
    _resnet(world, "tiny_default", None, 10)
    _resnet(world, "tiny_10", 10, 10)
    _resnet(world, "tiny_100", 100, 100)
    write_windows_run(world / "bert_good", {8: RATES}, BERT)
    _derived(world, "mfu_above_1", mfu=3.5, peak_flops=1.0, achieved_flops=3.5)  # 350 % of a peak
    _derived(world, "tokens_31x", tokens_per_sec=31 * 100.0 * 32)  # 31 x samples/s x seq_len
    throughput_run(world / "ranked" / "plain", batch_sizes=(8,))
    write_windows_run(world / "ranked" / "bert_good", {8: RATES}, BERT)
    _derived(world, "ranked/mfu_above_1", mfu=3.5, peak_flops=1.0, achieved_flops=3.5)
    _derived(world, "ranked/tokens_31x", tokens_per_sec=31 * 100.0 * 32)
    throughput_run(world / "hostile" / HOSTILE.replace("/", "_"), batch_sizes=(8,))
    (world / "pages").mkdir()


def _compare(case: str, a: str, b: str, named: tuple[str, ...], absent: tuple[str, ...] = (),
             kind: str = "silent-wrong") -> StudyCase:
    return StudyCase(case, ("compare", f"{{w}}/{a}", f"{{w}}/{b}"), named, exit=0, absent=absent, kind=kind)


INVALIDS = "invalid values (NaN, infinite, negative or not a number"

CASES: list[StudyCase] = [
    # a setting left at its default is the value it ran at: no invented difference, never None
    _compare("bert default against the same seq_len given", "bert_default", "bert_32",
             ("The runs differ in no setting",), absent=("seq_len", "None")),
    _compare("bert default against seq_len 16", "bert_default", "bert_16",
             ("The runs differ in one setting: model.seq_len (A 32, B 16).",), absent=("None",)),
    _compare("tiny classes default against the same given", "tiny_default", "tiny_10",
             ("The runs differ in no setting",), absent=("num_classes", "None")),
    _compare("tiny classes default against 100", "tiny_default", "tiny_100",
             ("The runs differ in one setting: model.num_classes (A 10, B 100).",), absent=("None",)),
    # a derived figure that no run measures: refused by compare in one line naming the file and the field
    StudyCase("mfu above 1", ("compare", "{w}/bert_good", "{w}/mfu_above_1"),
              ("{w}/mfu_above_1/summary.json: results[0].mfu is 3.5: above 1",), kind="silent-wrong"),
    StudyCase("tokens per second not from the rate", ("compare", "{w}/bert_good", "{w}/tokens_31x"),
              ("{w}/tokens_31x/summary.json: results[0].tokens_per_sec is 99200.0",
               "not samples_per_sec x 32 tokens per sample (3200)"), kind="silent-wrong"),
    # ... and left out of the report's ranking, counted as invalid values
    StudyCase("ranking of derived figures no run measures", ("report", "{w}/ranked", "-o", "{w}/pages/ranked.html"),
              (f"2 {INVALIDS}", "ranking table: {w}/pages/ranking.csv", "{w}/pages/ranked.html"), exit=0,
              writes=True, kind="silent-wrong"),
    # a folder named as a formula: the report and ranking.csv are written (the cell's neutralisation is held by
    # tests/test_csv_cells.py; this table's runner reads no file)
    StudyCase("a run folder named as a formula", ("report", "{w}/hostile", "-o", "{w}/pages/hostile.html"),
              ("ranking table: {w}/pages/ranking", "{w}/pages/hostile.html"), exit=0, absent=("invalid value",),
              writes=True, kind="unsafe-output"),
]
