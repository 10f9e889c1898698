"""The suite's PyTorch training step, with the CUDA profiler window around the last steps (for ncu and nsys).

Until ``trainbench profile`` exists this is how the committed ncu captures in benchmarks/results/ were taken:

    ncu --profile-from-start off --csv --print-units base --metrics ... \\
        python benchmarks/gpu/resnet50_steps.py BATCH [--warmup 3] [--profiled 1] [--precision fp32|bf16|fp16]
"""

from __future__ import annotations

import argparse

import torch

from trainbench.config import BenchConfig, ModelConfig
from trainbench.engines import load_engine


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("batch", type=int)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--profiled", type=int, default=1)
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"))
    parser.add_argument("--channels-last", action="store_true")
    args = parser.parse_args()
    model = ModelConfig(framework="torch", device="cuda", precision=args.precision, channels_last=args.channels_last)
    runner = load_engine("torch").make_runner(BenchConfig(model=model, batch_size=args.batch))
    for _ in range(args.warmup):
        runner.step()
    runner.sync()
    torch.cuda.profiler.start()
    for _ in range(args.profiled):
        runner.step()
    runner.sync()
    torch.cuda.profiler.stop()


if __name__ == "__main__":
    main()
