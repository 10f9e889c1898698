"""``trainbench compare RUN_A RUN_B``: is B faster or slower than A, and is the difference real?"""

from __future__ import annotations

import argparse
from pathlib import Path

from trainbench.cli.options import path_text, real_number

# A significance level: strictly between 0 and 1.
PROBABILITY = real_number(0.0, 1.0, above=True, below=True)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare", help="compare two throughput runs with a significance test",
        description="Per batch size: images/s of both runs, B's change over A, and a two-sided Mann-Whitney U "
        "test on the windows' images/s when both runs timed 3 or more windows (--windows), else on their step "
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
    for row in table.itertuples():
        verdict = "significant" if row.significant else "not significant"
        print(f"batch {row.batch_size}: {row.samples_per_sec_a:.2f} -> {row.samples_per_sec_b:.2f} images/s "
              f"({row.change_pct:+.1f} %), p = {row.p_value:.3g} over {row.sample}: {verdict}")
    return 0
