"""How long ``trainbench report`` takes over many runs, against a bare read of the same files.

Makes one real throughput run on the CPU (the tiny ResNet-50 at 32 px, three batch sizes; or copies ``--source``),
copies it ``--runs`` times into a temporary folder, then times, as separate processes taken in turn (best of
``--repeats``, interpreter start included in both): ``trainbench report`` of the folder, and a bare read of every
file under it (bytes read, JSON parsed, CSV split into rows). The copies share every setting, which is the report's
worst case for comparisons: each batch size pairs with its neighbour in every two runs (a report of 200 such runs
took 9 min 30 s when every two rows were compared). Fails (exit 1) when the report takes longer than
``--goal-s`` (5 s for 200 runs: issue 42). The last line of the output is a JSON object with every figure.

    python benchmarks/report_speed.py [--runs 200] [--source RUN_FOLDER] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO / "source")}  # this checkout's package, installed or not
TRAINBENCH = [sys.executable, "-c", "import sys; from trainbench.cli.main import main; sys.exit(main())"]

BARE_READ = """
import csv, json, sys
from pathlib import Path
for path in sorted(Path(sys.argv[1]).rglob("*")):
    if path.is_file():
        data = path.read_bytes()
        if path.suffix == ".json":
            json.loads(data)
        elif path.suffix == ".csv":
            list(csv.reader(data.decode("utf-8", errors="replace").splitlines()))
"""


def make_source(folder: Path) -> Path:
    """One tiny CPU run of three batch sizes, made with the command users run."""
    subprocess.run([*TRAINBENCH, "throughput", "--workload", "resnet50", "--size", "tiny", "--image-size", "32",
                    "--device", "cpu", "--batch-sizes", "2,4,8", "--warmup", "1", "--steps", "2", "--windows", "3",
                    "--output", str(folder)], check=True, capture_output=True, cwd=REPO, env=ENV)
    (run,) = [path for path in folder.iterdir() if path.is_dir()]
    return run


def timed(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, cwd=REPO, env=ENV)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--source", type=Path, help="a run folder to copy (default: make a tiny CPU run)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--goal-s", type=float, default=5.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        work = Path(temporary)
        source = args.source or make_source(work / "source")
        runs = work / "runs"
        for index in range(args.runs):
            shutil.copytree(source, runs / f"run{index:04d}")
        report_s, read_s = [], []
        for repeat in range(args.repeats):
            page = work / f"report{repeat}.html"
            report_s.append(timed([*TRAINBENCH, "report", str(runs), "-o", str(page)]))
            if not page.is_file():
                raise SystemExit(f"report_speed: trainbench report wrote no {page}")
            read_s.append(timed([sys.executable, "-c", BARE_READ, str(runs)]))
        files = sum(1 for path in runs.rglob("*") if path.is_file())
    figures = {"runs": args.runs, "files": files, "report_s": round(min(report_s), 3),
               "bare_read_s": round(min(read_s), 3), "report_over_read": round(min(report_s) / min(read_s), 2),
               "goal_s": args.goal_s, "met": min(report_s) <= args.goal_s}
    print(f"report of {args.runs} runs ({files} files): {figures['report_s']} s, best of {args.repeats}; bare read "
          f"{figures['bare_read_s']} s; ratio {figures['report_over_read']}; goal {args.goal_s} s: "
          f"{'met' if figures['met'] else 'missed'}")
    print(json.dumps(figures))
    return 0 if figures["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
