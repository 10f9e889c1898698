"""``trainbench campaign run|summary``: a declarative matrix of throughput (or profile) sweeps, repeated.

The matrix format is documented in ``trainbench.campaign.matrix`` and README ("Campaigns"). The campaign modules
are imported when a subcommand runs, so the other commands do not pay for PyYAML and pandas.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from trainbench.cli.options import SEED, path_text, whole_numbers
from trainbench.errors import UsageError
from trainbench.results.layout import RESULTS

if TYPE_CHECKING:
    from trainbench.campaign.matrix import Matrix

DEFAULT_OUTPUT = "campaign_data"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("campaign", help="run a matrix of benchmark configurations, repeated",
                                   description="Run every configuration of a YAML matrix, repeated and "
                                   "interleaved, into one campaign folder with one tidy results.csv.")
    commands = parser.add_subparsers(dest="campaign_command", required=True, metavar="{run,summary}")
    _add_run(commands)
    _add_summary(commands)


def _add_run(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "run", help="run (or resume) a campaign",
        description="Run every planned run of MATRIX that has not finished in the campaign folder: the same command "
        "again resumes. Overrides (key=value or key=v1,v2) replace or sweep an axis or set a setting.")
    parser.add_argument("matrix", type=path_text, metavar="MATRIX.yaml")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE[,VALUE...]")
    parser.add_argument("--output", type=path_text, default=DEFAULT_OUTPUT, metavar="DIR",
                        help=f"the campaign folder (default ./{DEFAULT_OUTPUT})")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    parser.add_argument("--shuffle", type=SEED, metavar="SEED",
                        help="run the (repetition, configuration) pairs in a random order this seed repeats")
    parser.add_argument("--only", type=whole_numbers(0), metavar="N[,N...]",
                        help="only these planned runs (numbers as --dry-run prints them); for job arrays")
    parser.add_argument("--replace-matrix", action="store_true",
                        help="run this matrix in a folder that holds another matrix's campaign (its runs are kept "
                        "on disk and left out of results.csv; a run whose folder name an old run holds is refused)")
    parser.add_argument("--emit-slurm", type=path_text, metavar="FILE",
                        help="write an sbatch job-array script (one task per planned run) to FILE, a new file, and "
                        "run nothing")
    parser.add_argument("--container", metavar="IMAGE",
                        help="only with --emit-slurm: run each task in `apptainer exec --nv IMAGE`")
    parser.set_defaults(run=run, trailing_positionals="overrides")


def _add_summary(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("summary", help="medians and spread per configuration over repetitions",
                                 description="Images/s per configuration and batch size over the repetitions of "
                                 "a campaign folder: median, min, max, spread and coefficient of variation.")
    parser.add_argument("folder", type=path_text, metavar="DIR")
    parser.set_defaults(run=summary)


def _refuse_idle_options(args: argparse.Namespace) -> None:
    """Options that would do nothing in this call are refused, not ignored."""
    if args.container is not None and not args.emit_slurm:
        raise UsageError(f"--container {args.container}: only used with --emit-slurm (each Slurm task runs in the "
                         "image); a campaign run here runs where this command runs")
    if args.emit_slurm and args.dry_run:
        raise UsageError("--emit-slurm and --dry-run: choose one (--dry-run prints the plan, --emit-slurm writes "
                         "the script; neither runs anything)")
    if args.emit_slurm and args.only:
        raise UsageError("--emit-slurm and --only: the script has one array task per planned run, each with its own "
                         "--only; submit a part with sbatch --array=N,M FILE")


def _emit_slurm(args: argparse.Namespace, matrix: Matrix) -> int:
    from trainbench.campaign.matrix import planned_runs
    from trainbench.campaign.runner import check_campaign
    from trainbench.campaign.slurm import emit_sbatch, refuse_existing

    path = Path(args.emit_slurm)
    refuse_existing(path)  # before the matrix's data is looked at again or any folder is made
    check_campaign(Path(args.output), matrix, args.shuffle, args.replace_matrix)
    runs = len(planned_runs(matrix, args.shuffle))
    emit_sbatch(path, Path(args.matrix), Path(args.output), runs, args.overrides, container=args.container,
                shuffle_seed=args.shuffle, replace_matrix=args.replace_matrix)
    print(f"wrote {path}: {runs} array tasks; submit with: sbatch {path}")
    return 0


def run(args: argparse.Namespace) -> int:
    from trainbench.campaign.matrix import format_plan, load_matrix, parse_overrides

    _refuse_idle_options(args)
    matrix = load_matrix(args.matrix, parse_overrides(args.overrides))
    if args.dry_run:
        print(format_plan(matrix, args.shuffle))
        return 0
    if args.emit_slurm:
        return _emit_slurm(args, matrix)
    from trainbench.campaign.runner import run_campaign
    from trainbench.campaign.table import campaign_runs

    folder = Path(args.output)
    outcome = run_campaign(matrix, folder, lambda line: print(line, flush=True), args.shuffle,
                           args.only or (), args.replace_matrix)
    for note in campaign_runs(folder).left_out:
        print(f"not in results.csv: {note}")
    print(f"campaign: ran {len(outcome.ran)}, {len(outcome.failed)} with a failed batch size; skipped "
          f"{len(outcome.skipped)} finished before; results: {folder / RESULTS}")
    print(f"report: trainbench report {folder}", flush=True)
    print(folder)
    return 1 if outcome.failed else 0


def summary(args: argparse.Namespace) -> int:
    from trainbench.campaign.table import campaign_runs, campaign_summary, format_summary, invalid_errors, runs_table

    folder = Path(args.folder)
    if not folder.is_dir():
        raise UsageError(f"{folder}: not a campaign folder ({'a file' if folder.exists() else 'no such folder'})")
    runs = campaign_runs(folder)
    table = runs_table(runs)
    if table.empty:
        left = f" ({'; '.join(runs.left_out)})" if runs.left_out else ""
        raise UsageError(f"{folder}: no finished run (run_*_ret_* folders) to summarise{left}")
    print(format_summary(campaign_summary(table), invalid_errors(table), runs.left_out))
    return 0
