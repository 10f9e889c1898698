"""``trainbench report DIR... [-o report.html]``: one self-contained HTML page of everything under the folders.

The gathering and the writing are ``report/gather.py`` (loaded only when this command runs), the page
``report/html.py``. ``-o`` names the file, or an existing folder to write ``report.html`` into; a name that is taken
gets ``-1``, ``-2``... (nothing is ever overwritten). The ranking table of every measured setting is written
beside it as ``ranking.csv`` (the same rule: ``ranking-1.csv`` when taken).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from trainbench.cli.options import path_text
from trainbench.results.layout import REPORT_PAGE


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report", help="one self-contained HTML page of runs, campaigns, profiles, models and training",
        description="Write one HTML file (no network, images embedded) with everything measured under the folders: "
        "a headline (the best setting per workload and device), a ranking of every measured setting (also written "
        "beside the page as ranking.csv), environment, throughput with its spread, failures, input-bound verdicts, "
        "campaigns and scaling efficiency, GPU telemetry, core utilization and top kernels, nsys timelines, GPU "
        "variability, comparisons of the settings that differ in one setting (change, interval, Welch's t-test), "
        "performance models and training curves; a section without data says why. A value that is no "
        "measurement (NaN, infinite, negative, a text) is listed as invalid and left out of figures, comparisons and "
        "statistics. The last line printed is the page's file.")
    parser.add_argument("dirs", nargs="+", type=path_text, metavar="DIR",
                        help="folders searched for runs, profiles, campaigns, variability studies, models, training")
    parser.add_argument("-o", "--output", type=path_text, default=REPORT_PAGE, metavar="FILE",
                        help=f"the HTML file (default ./{REPORT_PAGE}), or an existing folder to write "
                        f"{REPORT_PAGE} into; "
                        "nothing is overwritten: a name that is taken gets -1, -2... before its suffix")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from trainbench.report.gather import left_out_lines, make_report, output_file  # pandas, matplotlib: here only

    output = output_file(args.output)  # before the gathering: a wrong -o is refused at once
    path, data, ranking = make_report([Path(folder) for folder in args.dirs], output)
    for line in left_out_lines(data):
        print(line)
    if ranking is not None:
        print(f"ranking table: {ranking}")
    print(path)
    return 0
