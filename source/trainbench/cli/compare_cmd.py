"""``trainbench compare RUN_A RUN_B``: is B faster or slower than A, and is the difference real?"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare", help="compare two throughput runs with a significance test",
        description="Per batch size: images/s of both runs, B's change over A, and a two-sided Mann-Whitney U "
        "test on the windows' images/s when both runs timed 3 or more windows (--repeats), else on their step "
        "times (significant when p < --alpha).",
    )
    parser.add_argument("run_a", metavar="RUN_A", help="baseline run folder")
    parser.add_argument("run_b", metavar="RUN_B", help="run folder compared with it")
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from trainbench.bench.compare import compare_runs  # pandas and scipy: loaded only for this command

    table = compare_runs(Path(args.run_a), Path(args.run_b), args.alpha)
    if table.empty:
        print("no batch size was measured successfully in both runs")
        return 1
    for row in table.itertuples():
        verdict = "significant" if row.significant else "not significant"
        print(f"batch {row.batch_size}: {row.images_per_sec_a:.2f} -> {row.images_per_sec_b:.2f} images/s "
              f"({row.change_pct:+.1f} %), p = {row.p_value:.3g} over {row.sample}: {verdict}")
    return 0
