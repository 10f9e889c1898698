"""``trainbench compare RUN_A RUN_B``: is B faster or slower than A, and is the difference real?"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from trainbench.cli.options import path_text, real_number
from trainbench.render.console import aligned, per_second, sample_unit_of

# A significance level: strictly between 0 and 1.
PROBABILITY = real_number(0.0, 1.0, above=True, below=True)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare", help="compare two throughput runs with a significance test",
        description="Whether the runs differ in one setting, in several (then a change is no one setting's effect) "
        "or in none, and how each run's step ran (matmul precision, optimizer; unknown in files from before they "
        "were recorded); then per batch size: samples/s of both runs (in the workload's unit; tokens/s and MFU where "
        "recorded; runs of different workloads are refused), B's change over A with its 95 % interval, and "
        "Welch's t-test on the windows' samples/s (significant when p < --alpha). Runs need 2 or more windows a "
        "side for a verdict (--windows 3 or more for a useful one).",
    )
    parser.add_argument("run_a", type=path_text, metavar="RUN_A", help="baseline run folder")
    parser.add_argument("run_b", type=path_text, metavar="RUN_B", help="run folder compared with it")
    parser.add_argument("--alpha", type=PROBABILITY, default=0.05, help="significance level (default 0.05)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # pandas and scipy: loaded only for this command
    from trainbench.bench.compare import (
        compare_loaded,
        environment_sentence,
        load_run,
        settings_sentence,
        split_differences,
        statuses,
        step_line,
    )

    run_a, run_b = load_run(Path(args.run_a)), load_run(Path(args.run_b))
    table = compare_loaded(run_a, run_b, args.alpha)
    print(settings_sentence(run_a, run_b))
    measured, _ = split_differences(run_a, run_b)
    if len(measured) > 1:  # the sentence names them; their values here
        for setting, value_a, value_b in measured:
            print(f"  {setting}: A {value_a}, B {value_b}")
    if (step := step_line(run_a, run_b)) is not None:
        print(step)
    if (env := environment_sentence(run_a, run_b)) is not None:
        print(env)
    if table.empty:
        print(f"no batch size was measured successfully in both runs (A: {statuses(run_a)}; B: {statuses(run_b)})")
        return 1
    rows = table.to_dict("records")
    print("\n".join(aligned(_table(rows, per_second(sample_unit_of(run_a.header))))))
    for row in rows:
        print(f"batch {row['batch_size']}: {row['verdict']}")
    return 0


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))  # NaN: the table's missing value


def _rate(value: Any) -> str:
    """4 significant digits (1560, 98.25, 0.5000), all of a whole number's; "-" when missing."""
    if _missing(value):
        return "-"
    digits = 3 - math.floor(math.log10(abs(value))) if value else 0
    return f"{value:.{max(0, digits)}f}"


def _change(row: dict[str, Any]) -> str:
    """"+12.3 % [+10.1, +14.6]": the change and its interval (without a test, the change alone)."""
    text = f"{row['change_pct']:+.1f} %"
    if _missing(row["change_low_pct"]):
        return text
    return f"{text} [{row['change_low_pct']:+.1f}, {row['change_high_pct']:+.1f}]"


def _table(rows: list[dict[str, Any]], unit: str) -> list[tuple[str, ...]]:
    """The header and a line per batch size; tokens/s and MFU columns only where a run recorded them."""
    extra = [(name, header, text) for name, header, text in (
        ("tokens_per_sec", "tokens/s", _rate), ("mfu", "MFU %", lambda v: "-" if _missing(v) else f"{100 * v:.1f}"))
        if any(not _missing(row[f"{name}_{side}"]) for row in rows for side in "ab")]
    header = ("batch", f"A {unit}", f"B {unit}", "change [95 % interval]", "p", "windows A/B",
              *(f"{side.upper()} {title}" for _, title, _ in extra for side in "ab"))
    lines = [header]
    for row in rows:
        p_value = "-" if _missing(row["p_value"]) else f"{row['p_value']:.2g}"
        lines.append((str(row["batch_size"]), _rate(row["samples_per_sec_a"]), _rate(row["samples_per_sec_b"]),
                      _change(row), p_value, f"{row['windows_a']}/{row['windows_b']}",
                      *(text(row[f"{name}_{side}"]) for name, _, text in extra for side in "ab")))
    return lines
