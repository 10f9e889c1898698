"""What does the GPU timeline sampler cost? images/s with the sampler off and on, in one run, interleaved.

The same ``trainbench throughput`` sweep runs alternately with ``--telemetry-interval 0`` (energy counters at the
window edges only) and with the sampler at ``--interval`` (default 0.1 s), ``--pairs`` times, so drift in the
machine hits both alike. Printed: the medians of each batch size's images/s, their ratio (on / off) and the number
of timeline samples the "on" runs took; the goal is a cost under 1 % (ratio >= 0.99). Needs a GPU for the sampler
to run at all: on the CPU there is no GPU telemetry and the script says so (its ratio is then the noise floor).

    python benchmarks/telemetry_overhead.py [--pairs 3] [--interval 0.1] -- [trainbench throughput options]
    e.g. python benchmarks/telemetry_overhead.py -- --framework torch --precision bf16 --batch-sizes 64,256 \\
             --steps 200 --device cuda

Prints one JSON line with all figures last; exits 1 when a ratio is below --threshold (default 0.99).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def sweep(options: list[str], interval: float, output: Path) -> dict[int, dict[str, Any]]:
    """One throughput sweep; its ok results by batch size."""
    command = [sys.executable, "-m", "trainbench", "throughput", *options, "--telemetry-interval", str(interval),
               "--output", str(output)]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO, check=False)
    if done.returncode != 0:
        raise SystemExit(f"telemetry_overhead: {' '.join(command)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    return {row["batch_size"]: row for row in summary["results"] if row["status"] == "ok"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=3, help="off/on pairs, interleaved (default 3)")
    parser.add_argument("--interval", type=float, default=0.1, help="the sampler's period in s (default 0.1)")
    parser.add_argument("--threshold", type=float, default=0.99)
    parser.add_argument("options", nargs="*", help="trainbench throughput options (after --)")
    args = parser.parse_args()
    rates: dict[str, dict[int, list[float]]] = {"off": {}, "on": {}}
    samples: dict[int, list[int]] = {}
    notes: set[str] = set()
    with tempfile.TemporaryDirectory() as scratch:
        for pair in range(args.pairs):
            for mode, interval in (("off", 0.0), ("on", args.interval)):
                results = sweep(args.options, interval, Path(scratch) / f"{mode}{pair}")
                for batch, row in results.items():
                    rates[mode].setdefault(batch, []).append(row["images_per_sec"])
                    if mode == "on":
                        samples.setdefault(batch, []).append(row.get("telemetry_samples") or 0)
                        notes.update([row["telemetry_note"]] if row.get("telemetry_note") else [])
    figures = []
    for batch in sorted(rates["on"]):
        off, on = statistics.median(rates["off"][batch]), statistics.median(rates["on"][batch])
        figures.append({"batch_size": batch, "off_images_per_sec": off, "on_images_per_sec": on,
                        "ratio_on_over_off": on / off, "timeline_samples": samples[batch],
                        "off_all": rates["off"][batch], "on_all": rates["on"][batch]})
        print(f"batch {batch}: off {off:.2f}, on {on:.2f} images/s, ratio {on / off:.4f}, "
              f"samples per run {samples[batch]}")
    for note in sorted(notes):
        print(f"note: {note}")
    print(json.dumps({"pairs": args.pairs, "interval_s": args.interval, "figures": figures,
                      "notes": sorted(notes)}))
    return 0 if all(f["ratio_on_over_off"] >= args.threshold for f in figures) else 1


if __name__ == "__main__":
    raise SystemExit(main())
