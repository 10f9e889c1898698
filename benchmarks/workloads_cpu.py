"""Samples/s (and tokens/s) of every workload x framework pair at ``--size tiny`` on the CPU.

Each pair is one ordinary ``trainbench throughput`` run (a worker process per batch size, warm-up excluded, the
rate = samples / wall time of the timed windows), so the figure is exactly what a user gets from:

    trainbench throughput --framework F --workload W --size tiny --device cpu --batch-sizes 4 \\
        --warmup 3 --steps 10 --windows 3

    python benchmarks/workloads_cpu.py [--workloads resnet50,transformer,bert,gpt2,retinanet] [--frameworks torch,tf]
                                       [--batch-size 4] [--steps 10] [--windows 3]

Pairs the registry marks unsupported (gpt2 on tf) are listed with the registry's reason, not run. Prints one line
per pair while it runs and one JSON line with all figures last (median samples/s over the windows, min and max,
tokens/s, parameters, training FLOPs per sample as the run counted them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from trainbench import workloads

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
KEPT = ("samples_per_sec", "samples_per_sec_min", "samples_per_sec_max", "tokens_per_sec", "mfu", "status")


def run_pair(workload: str, framework: str, args: argparse.Namespace, output: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "trainbench", "throughput", "--framework", framework, "--workload", workload,
               "--size", "tiny", "--device", "cpu", "--batch-sizes", str(args.batch_size), "--warmup",
               str(args.warmup), "--steps", str(args.steps), "--windows", str(args.windows), "--output", str(output)]
    done = subprocess.run(command, capture_output=True, text=True, env=ENV)
    if done.returncode != 0:
        return {"command": " ".join(command[1:]), "error": (done.stderr.strip().splitlines() or ["?"])[-1]}
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    row = summary["results"][0]
    found = {key: row.get(key) for key in KEPT}
    for key in ("parameters", "train_flops_per_sample", "sample_unit"):
        found[key] = summary.get(key, row.get(key))
    return {"command": "trainbench " + " ".join(command[3:-2]), **found}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", default=",".join(workloads.names()))
    parser.add_argument("--frameworks", default="torch,tf")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--windows", type=int, default=3)
    args = parser.parse_args()
    figures: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name in args.workloads.split(","):
            workload = workloads.get(name)
            for framework in args.frameworks.split(","):
                key = f"{name}/{framework}"
                problem = workload.framework_problem(framework)
                figures[key] = {"refused": problem} if problem else run_pair(name, framework, args, Path(scratch))
                print(key, json.dumps(figures[key]), flush=True)
    print(json.dumps({"batch_size": args.batch_size, "steps": args.steps, "windows": args.windows,
                      "figures": figures}))
    return 0 if all("error" not in figure for figure in figures.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
