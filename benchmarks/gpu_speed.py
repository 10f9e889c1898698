"""GPU speed in one run: the eager, compiled and CUDA-graph training steps, and the CPU and GPU input loaders.

On a GPU machine, from the repository root:

    python benchmarks/gpu_speed.py [--batch-sizes 32,64,128,256] [--steps 100] [--output gpu_speed]

1. Step modes: the same ``trainbench throughput`` sweep (PyTorch, bf16, channels-last, synthetic data made on the
   GPU) for each of ``--modes``: ``eager``, ``cuda-graph`` (``--cuda-graph``: the whole eager step captured once)
   and ``torch.compile`` modes (``reduce-overhead`` etc.: ``--compile MODE``). Compile or capture time is reported
   apart (``compile_s``), outside every timed window.
2. Input: ``--images`` ImageNet-sized JPEGs generated here (``trainbench data synth``, 500x375 at most) and
   converted to TFRecords (``trainbench data convert``), then, at ``--data-batch``, the same sweep with synthetic
   data, with ``--data --loader cpu`` (Pillow + torchvision in DataLoader workers) and with ``--loader gpu``
   (nvJPEG + augmentation on the GPU), in the best step mode; and each loader alone (``trainbench input-bench``).

``--skip-modes --data-mode MODE`` measures the loaders only; ``--shards DIR`` reads TFRecords made before instead of
generating them (``benchmarks/gpu_check/run.py`` runs the parts as separate steps this way).

Printed: images/s per mode and batch size with the goals of issue 17 (best >= 4,000 images/s, batch 32 >= 2,500),
and the loaders' images/s as a fraction of synthetic (goal: GPU loader >= 90 %). Everything lands in
``OUTPUT/gpu_speed.json``; the run folders (with their env.json) in ``OUTPUT/runs``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MODE_OPTIONS = {"eager": [], "cuda-graph": ["--cuda-graph"]}  # anything else: a torch.compile mode
DEFAULT_MODES = ["eager", "cuda-graph", "reduce-overhead"]
GOAL_BEST, GOAL_32, GOAL_GPU_LOADER = 4000.0, 2500.0, 0.90


def trainbench(*args: str, log: Path) -> str:
    """Runs ``python -m trainbench ARGS``; its output goes to ``log``; returns the last line printed."""
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'source'}:{os.environ.get('PYTHONPATH', '')}"}
    with open(log, "w") as out:
        done = subprocess.run([sys.executable, "-m", "trainbench", *args], stdout=subprocess.PIPE,
                              stderr=out, text=True, env=env, cwd=REPO, check=False)
        out.write(done.stdout)
    lines = done.stdout.strip().splitlines()
    if done.returncode not in (0, 1) or not lines:
        raise SystemExit(f"trainbench {' '.join(args)} failed (exit {done.returncode}); see {log}")
    return lines[-1]


def common(args: argparse.Namespace) -> list[str]:
    """What every sweep shares: PyTorch, the device, precision, layout, input size and warm-up."""
    layout = ["--channels-last"] if args.precision != "fp32" else []
    warmup = ["--warmup", str(args.warmup)] if args.warmup is not None else []
    return ["--framework", "torch", "--device", args.device, "--precision", args.precision, *layout,
            "--image-size", str(args.image_size), *warmup]


def sweep(args: argparse.Namespace, options: list[str], log: Path) -> dict[int, dict[str, Any]]:
    """One throughput sweep: every batch size's result row (ok or failed)."""
    output = args.output / "runs"
    run_dir = Path(trainbench("throughput", *common(args), *options, "--output", str(output), log=log))
    return {row["batch_size"]: row for row in json.loads((run_dir / "summary.json").read_text())["results"]}


def mode_options(mode: str) -> list[str]:
    return MODE_OPTIONS.get(mode, ["--compile", mode])


def step_modes(args: argparse.Namespace, out: Path) -> dict[str, dict[int, dict[str, Any]]]:
    rows = {}
    for mode in args.modes:
        started = time.perf_counter()
        rows[mode] = sweep(args, [*mode_options(mode), "--batch-sizes", args.batch_sizes, "--steps", str(args.steps)],
                           out / f"throughput_{mode}.log")
        print(f"{mode}: {time.perf_counter() - started:.0f} s", flush=True)
    return rows


def make_data(args: argparse.Namespace, out: Path) -> Path:
    """--images JPEGs of ImageNet's sizes in 100 classes, as TFRecord shards (one per core at least)."""
    tree, shards = out / "imagenet_like", out / "tfrecords"
    classes = 100
    trainbench("data", "synth", "--output", str(tree), "--classes", str(classes), "--train-per-class",
               str(max(1, args.images // classes)), "--val-per-class", "1", "--size", args.jpeg_size,
               log=out / "synth.log")
    trainbench("data", "convert", str(tree), "--output", str(shards), "--train-shards",
               str(max(16, os.cpu_count() or 1)), "--validation-shards", "1", log=out / "convert.log")
    return shards


def loaders(args: argparse.Namespace, shards: Path, mode: str, out: Path) -> dict[str, Any]:
    """Synthetic against real TFRecords through each loader, at --data-batch, in step mode ``mode``."""
    timed = [*mode_options(mode), "--batch-sizes", str(args.data_batch), "--steps", str(args.steps)]
    figures: dict[str, Any] = {"mode": mode, "batch_size": args.data_batch}
    figures["synthetic"] = sweep(args, timed, out / "loader_synthetic.log")[args.data_batch]
    for loader in args.loaders:
        figures[loader] = sweep(args, [*timed, "--data", str(shards), "--loader", loader],
                                out / f"loader_{loader}.log")[args.data_batch]
        alone = trainbench("input-bench", str(shards), "--framework", "torch", "--loader", loader, "--batch-size",
                           str(args.data_batch), "--image-size", str(args.image_size), "--steps", "30",
                           log=out / f"input_bench_{loader}.log")
        figures[f"{loader}_alone"] = json.loads(alone)
    return figures


def rate(row: dict[str, Any] | None) -> float | None:
    return row.get("samples_per_sec") if row and row.get("status") == "ok" else None


def report(modes: dict[str, dict[int, dict[str, Any]]], data: dict[str, Any] | None) -> dict[str, Any]:
    """Prints the tables and the goals; returns the figures they show."""
    sizes = sorted({size for rows in modes.values() for size in rows})
    print("\nimages/s (compile or capture s)  " + "  ".join(f"{size:>14}" for size in sizes))
    for mode, rows in modes.items():
        cells = [f"{rate(rows.get(s)) or 0:>8.1f} ({(rows.get(s) or {}).get('compile_s') or 0:>3.0f})"
                 for s in sizes]
        print(f"{mode:<33} " + "  ".join(f"{cell:>14}" for cell in cells))
    best = {mode: max((r for r in map(rate, rows.values()) if r), default=0.0) for mode, rows in modes.items()}
    at_32 = {mode: rate(rows.get(32)) for mode, rows in modes.items()}
    eager_best = best.get("eager") or None
    summary: dict[str, Any] = {"best": best, "at_32": at_32,
                               "best_over_eager": {m: b / eager_best for m, b in best.items()} if eager_best else {}}
    top = max(best.values(), default=0.0)
    top_32 = max((r for r in at_32.values() if r), default=0.0)
    if modes:
        print(f"best {top:.0f} images/s (goal {GOAL_BEST:.0f}: {'met' if top >= GOAL_BEST else 'missed'}); "
              f"batch 32 {top_32:.0f} (goal {GOAL_32:.0f}: {'met' if top_32 >= GOAL_32 else 'missed'})")
    if data:
        synthetic = rate(data["synthetic"]) or 0.0
        summary["loaders"] = {}
        for loader in [name for name in ("cpu", "gpu") if name in data]:
            training = rate(data[loader])
            share = training / synthetic if training and synthetic else None
            alone = data[f"{loader}_alone"]["images_per_sec"]
            summary["loaders"][loader] = {"training": training, "of_synthetic": share, "alone": alone,
                                          "input_bound": (data[loader] or {}).get("input_bound")}
            text = f"{share:.1%} of synthetic" if share else "failed"
            print(f"{loader} loader at batch {data['batch_size']} ({data['mode']}): "
                  f"{training or 0:.0f} images/s training = {text}; alone {alone:.0f} images/s")
        if "gpu" in summary["loaders"]:
            gpu_share = summary["loaders"]["gpu"]["of_synthetic"] or 0.0
            verdict = "met" if gpu_share >= GOAL_GPU_LOADER else "missed"
            print(f"GPU loader goal {GOAL_GPU_LOADER:.0%} of synthetic: {verdict}")
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch-sizes", default="32,64,128,256")
    parser.add_argument("--steps", type=int, default=100, help="timed steps per batch size (default 100)")
    parser.add_argument("--modes", type=lambda text: text.split(","), default=DEFAULT_MODES,
                        help=f"eager, cuda-graph and/or torch.compile modes (default {','.join(DEFAULT_MODES)})")
    parser.add_argument("--images", type=int, default=5000, help="generated training JPEGs (default 5000)")
    parser.add_argument("--data-batch", type=int, default=256, help="batch size of the loader runs (default 256)")
    parser.add_argument("--data-mode", help="step mode of the loader runs (default: the fastest measured)")
    parser.add_argument("--skip-data", action="store_true", help="the step modes only")
    parser.add_argument("--skip-modes", action="store_true", help="the loaders only (needs --data-mode)")
    parser.add_argument("--shards", type=Path, help="TFRecords to read (default: generated here, --images of them)")
    parser.add_argument("--warmup", type=int, help="untimed steps per batch size (default trainbench's)")
    parser.add_argument("--output", type=Path, default=Path("gpu_speed"))
    parser.add_argument("--device", default="cuda", help="cuda (default); cpu only to try the script itself")
    parser.add_argument("--precision", default="bf16", help="bf16 (default, with channels-last) or fp32")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--jpeg-size", default="500x375", help="largest generated JPEG (default 500x375, ImageNet's)")
    parser.add_argument("--loaders", type=lambda text: text.split(","), default=["cpu", "gpu"],
                        help="the loaders measured against synthetic data (default cpu,gpu)")
    args = parser.parse_args()
    if args.skip_modes and not args.data_mode:
        parser.error("--skip-modes needs --data-mode")
    args.output.mkdir(parents=True, exist_ok=True)
    modes = {} if args.skip_modes else step_modes(args, args.output)
    data = None
    if not args.skip_data:
        started = time.perf_counter()
        shards = args.shards or make_data(args, args.output)
        print(f"data: {time.perf_counter() - started:.0f} s", flush=True)
        mode = args.data_mode or max(modes, key=lambda mode: rate(modes[mode].get(args.data_batch)) or 0.0)
        data = loaders(args, shards, mode, args.output)
    summary = report(modes, data)
    result = {"args": {k: str(v) for k, v in vars(args).items()}, "modes": modes, "loaders": data, "summary": summary}
    (args.output / "gpu_speed.json").write_text(json.dumps(result, indent=1, default=str))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
