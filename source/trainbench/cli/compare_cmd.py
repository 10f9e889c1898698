"""``trainbench compare RUN_A RUN_B``: is B faster or slower than A, and is the difference real?"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainbench.cli.options import path_text, real_number
from trainbench.report.console import per_second, sample_unit_of

# A significance level: strictly between 0 and 1.
PROBABILITY = real_number(0.0, 1.0, above=True, below=True)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare", help="compare two throughput runs with a significance test",
        description="Per batch size: samples/s of both runs (in the workload's unit; tokens/s and MFU where "
        "recorded; runs of different workloads are refused), B's change over A, and a two-sided Mann-Whitney U "
        "test on the windows' samples/s when both runs timed 3 or more windows (--windows), else on their step "
        "times (significant when p < --alpha). Settings in which the runs differ are listed first.",
    )
    parser.add_argument("run_a", type=path_text, metavar="RUN_A", help="baseline run folder")
    parser.add_argument("run_b", type=path_text, metavar="RUN_B", help="run folder compared with it")
    parser.add_argument("--alpha", type=PROBABILITY, default=0.05, help="significance level (default 0.05)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # pandas and scipy: loaded only for this command
    from trainbench.bench.compare import compare_loaded, load_run, setting_differences, statuses

    run_a, run_b = load_run(Path(args.run_a)), load_run(Path(args.run_b))
    table = compare_loaded(run_a, run_b, args.alpha)
    for setting, value_a, value_b in setting_differences(run_a, run_b):
        print(f"note: the runs differ in {setting}: A {value_a}, B {value_b}")
    if table.empty:
        print(f"no batch size was measured successfully in both runs (A: {statuses(run_a)}; B: {statuses(run_b)})")
        return 1
    unit = per_second(sample_unit_of(run_a.header))
    for row in table.itertuples():
        verdict = "significant" if row.significant else "not significant"
        print(f"batch {row.batch_size}: {row.samples_per_sec_a:.2f} -> {row.samples_per_sec_b:.2f} {unit} "
              f"({row.change_pct:+.1f} %), p = {row.p_value:.3g} over {row.sample}: {verdict}{_work_text(row)}")
    return 0


def _pair(a: Any, b: Any, text: Callable[[float], str]) -> str:
    """"A -> B", a side without the value shown as "-"; "" when neither has it."""
    present = [value is not None and value == value for value in (a, b)]  # NaN: the table's missing value
    if not any(present):
        return ""
    return " -> ".join(text(value) if here else "-" for value, here in zip((a, b), present, strict=True))


def _work_text(row: Any) -> str:
    """"; 5120 -> 5390 tokens/s; MFU 31.2 -> 33.0 %" where the runs recorded them."""
    tokens = _pair(row.tokens_per_sec_a, row.tokens_per_sec_b, lambda v: f"{v:.0f}")
    mfu = _pair(row.mfu_a, row.mfu_b, lambda v: f"{100 * v:.1f}")
    return (f"; {tokens} tokens/s" if tokens else "") + (f"; MFU {mfu} %" if mfu else "")
