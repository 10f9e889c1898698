"""How fast ``trainbench data convert`` turns an ImageNet folder into TFRecords, against ``cp -r`` of the same tree.

Generates ``--images`` ImageNet-sized JPEGs (about 110 kB each, with their Annotation XML) with the synth module,
then, in turn ``--repeats`` times, copies the tree with ``cp -r`` and converts it with ``trainbench data convert
--workers 2``, each after the earlier writes are flushed. With ``--cache cold`` (the default) the tree's pages are
first dropped from the page cache (``posix_fadvise``), as for real ImageNet, which never fits in memory; with
``--cache warm`` both read it from memory.
Throughput is the tree's bytes over the best time of each: for the conversion, the time the command reports for
its own work (scan to last shard), since the interpreter start and the CLI's imports are a fixed second or so,
reported beside it. Fails (exit 1) unless the conversion reaches ``--min-ratio`` (default 0.5) of the copy's
MB/s. Where the TensorFlow input pipeline is installed (``trainbench.data.tf_pipeline``), also measures it on the
shards with ``trainbench input-bench`` and reports images/s per core. The last line of the output is a JSON
object with every figure.

    python benchmarks/convert_speed.py [--images 2000] [--workers 2] [--repeats 5] [--cache cold|warm]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    import trainbench  # noqa: F401
except ImportError:  # run from a plain checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "source"))

from trainbench.data.parallel import default_workers
from trainbench.data.synth import SynthOptions, synth

CLASSES = 10
VALIDATION_SHARE = 0.1
ENV = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "3"}


def tree_bytes(root: Path) -> int:
    return sum(path.stat().st_size for path in root.rglob("*") if path.is_file())


def settle(root: Path, cold: bool) -> None:
    """Flush earlier runs' writes (so they do not slow the next one down), and for a cold start evict the tree's
    pages so that the next reader goes to the disk (posix_fadvise needs no root, unlike drop_caches; it leaves
    dirty pages alone, hence the flush first)."""
    os.sync()
    if not cold:
        return
    for path in root.rglob("*"):
        if path.is_file():
            descriptor = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(descriptor)


def timed(command: list[str]) -> tuple[float, float, str]:
    """Wall time, CPU time (user + system, the command and its workers) and standard output of a command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(command, check=True, env=ENV, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, result.stdout


def reported_seconds(summary: str) -> float:
    """The conversion's own time from its summary line ('... in DIR: 12.3 s, ...')."""
    match = re.search(r": ([0-9.]+) s, ", summary)
    if match is None:
        raise SystemExit(f"no time in the summary line: {summary!r}")
    return float(match.group(1))


def convert_command(tree: Path, output: Path, workers: int, train_images: int) -> list[str]:
    # shards of about ImageNet's 1,250 images would be too few here; ~110 images each keeps every worker busy
    return [sys.executable, "-m", "trainbench", "data", "convert", str(tree), "--output", str(output),
            "--workers", str(workers), "--train-shards", str(max(1, train_images // 110)),
            "--validation-shards", "2"]


def input_pipeline(shards: Path, cores: int) -> dict[str, float] | None:
    """Images/s of the TensorFlow training input pipeline alone, per core; None where it is not installed."""
    if importlib.util.find_spec("trainbench.data.tf_pipeline") is None:
        return None
    result = subprocess.run([sys.executable, "-m", "trainbench", "input-bench", str(shards), "--framework", "tf",
                             "--workers", str(cores), "--batch-size", "32", "--warmup", "3", "--steps", "15"],
                            env=ENV, capture_output=True, text=True)
    if result.returncode != 0:
        print(f"input-bench failed: {result.stderr.strip()[-500:]}", file=sys.stderr)
        return None
    images_per_sec = float(json.loads(result.stdout.strip().splitlines()[-1])["images_per_sec"])
    return {"images_per_sec": images_per_sec, "cores": cores, "images_per_sec_per_core": images_per_sec / cores}


def measure(tree: Path, scratch: Path, args: argparse.Namespace, train_images: int) -> dict[str, list[float]]:
    """``cp -r`` and convert in turn, ``args.repeats`` times: wall and CPU seconds of each run."""
    times: dict[str, list[float]] = {"copy_s": [], "copy_cpu_s": [], "convert_s": [], "command_s": [],
                                     "command_cpu_s": []}
    for _ in range(args.repeats):
        settle(tree, args.cache == "cold")
        wall, cpu, _ = timed(["cp", "-r", str(tree), str(scratch / "copy")])
        times["copy_s"].append(wall)
        times["copy_cpu_s"].append(cpu)
        shutil.rmtree(scratch / "copy")
        settle(tree, args.cache == "cold")
        shutil.rmtree(scratch / "records", ignore_errors=True)
        wall, cpu, summary = timed(convert_command(tree, scratch / "records", args.workers, train_images))
        times["command_s"].append(wall)
        times["command_cpu_s"].append(cpu)
        times["convert_s"].append(reported_seconds(summary))
    return times


def report(figures: dict, min_ratio: float) -> None:
    times, pipeline = figures["times"], figures["input_pipeline"]
    print(f"tree: {figures['images']} JPEGs, {figures['tree_mb']:.1f} MB with the annotations; "
          f"page cache: {figures['cache']}")
    print(f"cp -r: {figures['copy_mb_s']:.1f} MB/s (best of {_seconds(times['copy_s'])})")
    print(f"convert --workers {figures['workers']}: {figures['convert_mb_s']:.1f} MB/s, "
          f"{figures['convert_images_s']:.1f} images/s (best of {_seconds(times['convert_s'])}; "
          f"whole command with interpreter start: {_seconds(times['command_s'])})")
    print(f"CPU time (user + system): cp -r {_seconds(times['copy_cpu_s'])}; the whole convert command, all "
          f"processes: {_seconds(times['command_cpu_s'])}")
    print(f"ratio: {figures['ratio']:.0%} of the copy (needed: {min_ratio:.0%})")
    if pipeline:
        print(f"input pipeline (tf, training): {pipeline['images_per_sec']:.1f} images/s on {pipeline['cores']} "
              f"cores, {pipeline['images_per_sec_per_core']:.1f} per core")
    print(json.dumps(figures))


def _seconds(times: list[float]) -> str:
    return ", ".join(f"{seconds:.2f}" for seconds in times) + " s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--min-ratio", type=float, default=0.5)
    parser.add_argument("--cache", choices=("cold", "warm"), default="cold")
    parser.add_argument("--no-input-pipeline", action="store_true", help="skip the input-pipeline figure")
    args = parser.parse_args()
    per_class = args.images // CLASSES
    val_per_class = int(per_class * VALIDATION_SHARE)
    with tempfile.TemporaryDirectory(prefix="convert_speed_") as folder:
        scratch = Path(folder)
        made = synth(SynthOptions(scratch / "imagenet", CLASSES, per_class - val_per_class, val_per_class,
                                  workers=args.workers))
        size = tree_bytes(made.output)
        times = measure(made.output, scratch, args, CLASSES * (per_class - val_per_class))
        cores = min(args.workers, default_workers())
        pipeline = None if args.no_input_pipeline else input_pipeline(scratch / "records", cores)
    copy_mb_s, convert_mb_s = size / 1e6 / min(times["copy_s"]), size / 1e6 / min(times["convert_s"])
    figures = {"images": made.images, "tree_mb": size / 1e6, "cache": args.cache, "workers": args.workers,
               "cores": os.cpu_count(), "copy_mb_s": copy_mb_s, "convert_mb_s": convert_mb_s,
               "convert_images_s": made.images / min(times["convert_s"]), "ratio": convert_mb_s / copy_mb_s,
               "input_pipeline": pipeline, "times": times}
    report(figures, args.min_ratio)
    return 0 if figures["ratio"] >= args.min_ratio else 1


if __name__ == "__main__":
    sys.exit(main())
