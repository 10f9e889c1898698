"""Tiny Llama on the CPU four ways: one process, two with DDP, two with FSDP, one with activation checkpointing.

Each variant is one `trainbench throughput --workload llama --size tiny --device cpu` sweep, the variants run in
turn ``--rounds`` times (drift spread over all of them). Printed per variant: the median of its runs' tokens/s (and
their range), the ratio to one process, what one rank holds (parameters_held) and keeps (activation bytes), and
the model / hardware FLOPs per sequence. On 2 cores two ranks share the machine, so the figure is what sharding and
recomputation cost on a CPU, not what they gain on GPUs: FSDP gathers every block's parameters for its forward and
again for its backward and reduce-scatters its gradients, where DDP all-reduces once.

    python benchmarks/llama_sharding_cpu.py [--rounds 3] [--batch 8] [--steps 20]

Prints one JSON line with all figures last.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from ab_sweeps import sweep

VARIANTS: dict[str, list[str]] = {
    "one process": [],
    "ddp over 2": ["--gpus", "2", "--shard", "ddp"],
    "fsdp over 2": ["--gpus", "2", "--shard", "fsdp"],
    "one process, checkpointed": ["--activation-checkpointing", "full"],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8, help="sequences per process and step (default 8)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per window (default 20)")
    args = parser.parse_args()
    common = ["--workload", "llama", "--size", "tiny", "--device", "cpu", "--batch-sizes", str(args.batch),
              "--warmup", "3", "--steps", str(args.steps), "--windows", "3", "--telemetry-interval", "0"]
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(args.rounds):
            for index, (name, extra) in enumerate(VARIANTS.items()):
                rows[name].append(sweep([*common, *extra], Path(scratch) / f"{index}_{round_}")[args.batch])
    base = statistics.median(row["tokens_per_sec"] for row in rows["one process"])
    figures = []
    for name, runs in rows.items():
        rates = [row["tokens_per_sec"] for row in runs]
        last = runs[-1]
        figure = {"variant": name, "tokens_per_sec": statistics.median(rates), "min": min(rates), "max": max(rates),
                  "ratio_to_one_process": statistics.median(rates) / base, "world_size": last["world_size"] or 1,
                  "parameters": last["parameters"], "parameters_held": last["parameters_held"],
                  "ranks_held": [rank["parameters_held"] for rank in last["ranks"] or []],
                  "activation_bytes": last["memory_activations_bytes"],
                  "train_flops_per_sample": last["train_flops_per_sample"],
                  "hardware_flops_per_sample": last["hardware_flops_per_sample"],
                  "other_cpu_cores": max(row["other_cpu_cores"] or 0.0 for row in runs)}
        figures.append(figure)
        print(f"{name}: {figure['tokens_per_sec']:,.0f} tokens/s ({figure['min']:,.0f}-{figure['max']:,.0f}), "
              f"x{figure['ratio_to_one_process']:.2f}; holds {figure['parameters_held']:,} of "
              f"{figure['parameters']:,} parameters, keeps {figure['activation_bytes']:,} activation bytes; "
              f"FLOPs per sequence model {figure['train_flops_per_sample']:,.0f}, hardware "
              f"{figure['hardware_flops_per_sample']:,.0f}")
    print(json.dumps({"rounds": args.rounds, "batch": args.batch, "steps": args.steps, "figures": figures}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
