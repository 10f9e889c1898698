"""How fast ``trainbench data coco`` converts a COCO-format set on this machine's CPUs: images/s and MB/s.

Generates ``--images`` COCO-sized JPEGs with ``trainbench data synth-coco`` (640x480 at most, 1-4 boxes each,
COCO 2017's category ids), then runs, ``--repeats`` times per worker count and interleaved (each round runs the
worker counts in a rotated order, so a machine shared with other work slows each alike), the command a user runs:

    trainbench data coco ANNOTATIONS.json IMAGE_DIR --output DIR --shards 8 --workers W

into a fresh folder each time (the page cache warm: the set was just written or read). The figures are the
command's own summary line (annotations read to last shard written, without the interpreter's start): images/s
and MB/s of image files read. Medians with min and max; the last line printed is a JSON object with every figure.

    python benchmarks/coco_convert_cpu.py [--images 1000] [--repeats 3] [--workers 1,2] [--scratch DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from trainbench.data.coco_synth import ANNOTATIONS, IMAGE_FOLDER, CocoSynthOptions, synth_coco
from trainbench.data.parallel import default_workers

SUMMARY = re.compile(r"converted ([\d,]+) images .* with ([\d,]+) boxes .*: ([\d.]+) s, ([\d,.]+) images/s, "
                     r"([\d,.]+) MB/s")


def convert_once(root: Path, output: Path, workers: int, shards: int) -> dict[str, float]:
    command = [sys.executable, "-m", "trainbench", "data", "coco", str(root / ANNOTATIONS), str(root / IMAGE_FOLDER),
               "--output", str(output), "--shards", str(shards), "--workers", str(workers)]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    shutil.rmtree(output, ignore_errors=True)
    found = SUMMARY.search(done.stdout)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}: {done.stderr.strip() or done.stdout}")
    images, boxes, seconds, rate, mb_s = (float(text.replace(",", "")) for text in found.groups())
    return {"images": images, "boxes": boxes, "seconds": seconds, "images_s": rate, "mb_s": mb_s}


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", default="1,2", help="worker counts, comma-separated (default 1,2)")
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--scratch", type=Path, help="where the set and the outputs go (default: the temp folder)")
    args = parser.parse_args()
    counts = [int(text) for text in args.workers.split(",")]
    with tempfile.TemporaryDirectory(prefix="coco_convert_", dir=args.scratch) as folder:
        root = Path(folder) / "coco"
        made = synth_coco(CocoSynthOptions(root, args.images, workers=default_workers()))
        runs: dict[int, list[dict[str, float]]] = {count: [] for count in counts}
        for index in range(args.repeats):
            for count in counts[index % len(counts):] + counts[:index % len(counts)]:
                runs[count].append(convert_once(root, Path(folder) / "out", count, args.shards))
    figures = {"images": made.images, "boxes": made.boxes, "set_mb": made.bytes / 1e6, "cores": default_workers(),
               "repeats": args.repeats, "shards": args.shards,
               "workers": {str(count): {"images_s": spread([run["images_s"] for run in member]),
                                        "mb_s": spread([run["mb_s"] for run in member])}
                           for count, member in runs.items()}}
    print(f"set: {made.images:,} JPEGs ({made.bytes / 1e6:.1f} MB, {made.boxes:,} boxes); {default_workers()} cores; "
          f"medians (min-max) of {args.repeats} interleaved runs, warm page cache")
    for count, figure in figures["workers"].items():  # type: ignore[union-attr]
        rate, mb_s = figure["images_s"], figure["mb_s"]
        print(f"--workers {count}: {rate['median']:,.0f} images/s ({rate['min']:,.0f}-{rate['max']:,.0f}), "
              f"{mb_s['median']:,.1f} MB/s ({mb_s['min']:,.1f}-{mb_s['max']:,.1f})")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
