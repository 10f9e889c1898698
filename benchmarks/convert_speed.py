"""How fast ``trainbench data convert`` turns an ImageNet folder into TFRecords, against ``cp -r`` of the same tree.

Generates ``--images`` ImageNet-sized JPEGs (about 110 kB each, with their Annotation XML) with the synth module,
then measures, in one run, interleaved so that a machine shared with other work slows both alike:

1. for each page-cache state (``--caches``, default ``warm,cold``): ``--repeats`` pairs of ``cp -r`` of the tree and
   ``trainbench data convert --workers 2``, each after earlier writes are flushed; cold: the tree's pages dropped
   first (``posix_fadvise``, as for real ImageNet, which never fits in memory). MB/s = the tree's bytes / the
   time; for the conversion, the time it reports for its own work (scan to last shard; the interpreter's start
   and imports are a fixed second or so, kept beside it). Medians with min and max, and the ratio of medians.
2. CPU seconds per GB of tree (user + system of every process of the command; less sensitive to I/O noise than
   wall time), with the CRC-32C of google-crc32c (C) against the numpy fallback (``TRAINBENCH_CRC32C=numpy``),
   warm cache, interleaved.
3. Scaling: the conversion's images/s with 1, 2 and all cores' workers, warm cache, medians.

Goals (exit 1 when missed): the conversion at least ``--min-ratio`` (0.9) of the copy's median MB/s with 2 workers
on a warm cache, and at least ``--min-images`` (2,000) images/s with 2 workers. The last line is a JSON object
with every figure.

    python benchmarks/convert_speed.py [--images 2000] [--repeats 5] [--caches warm,cold]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
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


def timed(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Wall time, CPU time (user + system, the command and its workers) and standard output of a command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(command, check=True, env=env or ENV, capture_output=True, text=True)
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


def convert_once(tree: Path, scratch: Path, workers: int, train_images: int, cold: bool,
                 env: dict[str, str] | None = None) -> dict[str, float]:
    """One conversion into a fresh folder: its own reported seconds, the whole command's wall and CPU seconds."""
    shutil.rmtree(scratch / "records", ignore_errors=True)
    settle(tree, cold)
    wall, cpu, summary = timed(convert_command(tree, scratch / "records", workers, train_images), env)
    return {"convert_s": reported_seconds(summary), "command_s": wall, "command_cpu_s": cpu}


def copy_once(tree: Path, scratch: Path, cold: bool) -> dict[str, float]:
    settle(tree, cold)
    wall, cpu, _ = timed(["cp", "-r", str(tree), str(scratch / "copy")])
    shutil.rmtree(scratch / "copy")
    return {"copy_s": wall, "copy_cpu_s": cpu}


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def against_copy(tree: Path, scratch: Path, args: argparse.Namespace, train_images: int, size: int,
                 cold: bool) -> dict:
    """--repeats interleaved pairs of copy and convert (2 workers): MB/s medians and their spread."""
    runs = [{**copy_once(tree, scratch, cold), **convert_once(tree, scratch, 2, train_images, cold)}
            for _ in range(args.repeats)]
    copy_mb_s = [size / 1e6 / run["copy_s"] for run in runs]
    convert_mb_s = [size / 1e6 / run["convert_s"] for run in runs]
    ratio = statistics.median(convert_mb_s) / statistics.median(copy_mb_s)
    return {"copy_mb_s": spread(copy_mb_s), "convert_mb_s": spread(convert_mb_s), "ratio": ratio,
            "convert_images_s": spread([args.images_made / run["convert_s"] for run in runs]), "runs": runs}


def cpu_per_gb(tree: Path, scratch: Path, args: argparse.Namespace, train_images: int, size: int) -> dict:
    """CPU seconds per GB of the whole convert command, the C library's CRC against numpy's, interleaved."""
    seconds: dict[str, list[float]] = {"google-crc32c": [], "numpy": []}
    for _ in range(args.repeats):
        for name, env in (("google-crc32c", ENV), ("numpy", {**ENV, "TRAINBENCH_CRC32C": "numpy"})):
            run = convert_once(tree, scratch, 2, train_images, False, env)
            seconds[name].append(run["command_cpu_s"] / (size / 1e9))
    return {name: spread(values) for name, values in seconds.items()}


def scaling(tree: Path, scratch: Path, args: argparse.Namespace, train_images: int) -> dict[str, dict]:
    counts = sorted({1, 2, default_workers()})
    rates: dict[int, list[float]] = {count: [] for count in counts}
    for _ in range(max(1, args.repeats // 2)):
        for count in counts:
            rates[count].append(args.images_made / convert_once(tree, scratch, count, train_images, False)["convert_s"])
    return {str(count): spread(values) for count, values in rates.items()}


def _range(figure: dict[str, float], digits: int = 1) -> str:
    return f"{figure['median']:.{digits}f} ({figure['min']:.{digits}f}-{figure['max']:.{digits}f})"


def report(figures: dict, args: argparse.Namespace) -> bool:
    """Prints the tables; True when both goals are met."""
    print(f"tree: {figures['images']} JPEGs, {figures['tree_mb']:.1f} MB with the annotations; {figures['cores']} "
          f"cores; CRC-32C: {figures['crc32c']}; medians (min-max) of {args.repeats} interleaved runs")
    for cache, pair in figures["caches"].items():
        print(f"{cache:>4} cache: cp -r {_range(pair['copy_mb_s'])} MB/s; convert --workers 2 "
              f"{_range(pair['convert_mb_s'])} MB/s = {pair['ratio']:.0%} of the copy; "
              f"{_range(pair['convert_images_s'], 0)} images/s")
    cpu = figures["cpu_s_per_gb"]
    print(f"CPU s per GB (whole command, all processes, warm): google-crc32c {_range(cpu['google-crc32c'], 2)}, "
          f"numpy CRC {_range(cpu['numpy'], 2)}: {cpu['numpy']['median'] / cpu['google-crc32c']['median']:.2f}x")
    print("workers  images/s")
    for count, figure in figures["scaling"].items():
        print(f"{count:>7}  {_range(figure, 0)}")
    warm = figures["caches"].get("warm")
    ratio_ok = warm is not None and warm["ratio"] >= args.min_ratio
    images_ok = warm is not None and warm["convert_images_s"]["median"] >= args.min_images
    print(f"goal: warm-cache conversion >= {args.min_ratio:.0%} of the copy: {'met' if ratio_ok else 'missed'}; "
          f">= {args.min_images:.0f} images/s with 2 workers: {'met' if images_ok else 'missed'}")
    print(json.dumps(figures))
    return ratio_ok and images_ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--caches", type=lambda text: text.split(","), default=["warm", "cold"])
    parser.add_argument("--min-ratio", type=float, default=0.9)
    parser.add_argument("--min-images", type=float, default=2000.0)
    args = parser.parse_args()
    per_class = args.images // CLASSES
    val_per_class = int(per_class * VALIDATION_SHARE)
    with tempfile.TemporaryDirectory(prefix="convert_speed_") as folder:
        scratch = Path(folder)
        made = synth(SynthOptions(scratch / "imagenet", CLASSES, per_class - val_per_class, val_per_class,
                                  workers=default_workers()))
        args.images_made = made.images
        size, train_images = tree_bytes(made.output), CLASSES * (per_class - val_per_class)
        from trainbench.data.crc32c import IMPLEMENTATION

        figures = {"images": made.images, "tree_mb": size / 1e6, "cores": os.cpu_count(), "crc32c": IMPLEMENTATION,
                   "repeats": args.repeats,
                   "caches": {cache: against_copy(made.output, scratch, args, train_images, size, cache == "cold")
                              for cache in args.caches},
                   "cpu_s_per_gb": cpu_per_gb(made.output, scratch, args, train_images, size),
                   "scaling": scaling(made.output, scratch, args, train_images)}
    return 0 if report(figures, args) else 1


if __name__ == "__main__":
    sys.exit(main())
