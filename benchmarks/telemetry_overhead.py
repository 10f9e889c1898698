"""What does the GPU timeline sampler cost? images/s with the sampler off and on, in one run, interleaved.

The same ``trainbench throughput`` sweep runs alternately with ``--telemetry-interval 0`` (energy counters at the
window edges only) and with the sampler at ``--interval`` (default 0.1 s), ``--pairs`` times. Printed: the medians of
each batch size's images/s, their ratio (on / off) and the timeline samples the "on" runs took; the goal is a cost
under 1 % (ratio >= 0.99). The sampler runs only on a GPU: on the CPU there is no GPU telemetry and the script says
so (its ratio is then the noise floor).

    python benchmarks/telemetry_overhead.py [--pairs 3] [--interval 0.1] -- [trainbench throughput options]
    e.g. python benchmarks/telemetry_overhead.py -- --framework torch --precision bf16 --batch-sizes 64,256 \\
             --steps 200 --device cuda

With ``--keep DIR`` the run folders stay in DIR (``a_<pair>``: sampler off, ``b_<pair>``: on; each with its
``telemetry.png`` on a GPU). The JSON's ``energy`` lists, per "on" run and batch size, the energy counter's
``energy_j`` against the sampled power x the timed time (``sampled_power_w x window_s``): two independent readings
of the same energy (goal: within 5 %).

Prints one JSON line with all figures last; exits 1 when a ratio is below --threshold (default 0.99).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ab_sweeps import interleaved, ratios


def energy_checks(on: dict[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per "on" run with both readings: energy_j / (sampled_power_w x window_s); none without GPU telemetry."""
    checks = []
    for batch, rows in sorted(on.items()):
        for row in rows:
            energy, power, window = row.get("energy_j"), row.get("sampled_power_w"), row.get("window_s")
            if energy and power and window:
                checks.append({"batch_size": batch, "energy_j": energy, "sampled_power_w": power, "window_s": window,
                               "energy_over_sampled": energy / (power * window)})
    return checks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=3, help="off/on pairs, interleaved (default 3)")
    parser.add_argument("--interval", type=float, default=0.1, help="the sampler's period in s (default 0.1)")
    parser.add_argument("--threshold", type=float, default=0.99)
    parser.add_argument("--keep", type=Path, help="keep the run folders in this folder (default: none kept)")
    parser.add_argument("options", nargs="*", help="trainbench throughput options (after --)")
    args = parser.parse_args()
    off, on = interleaved(args.options, ["--telemetry-interval", "0"], ["--telemetry-interval", str(args.interval)],
                          args.pairs, args.keep)
    figures = ratios(off, on)
    notes = sorted({row["telemetry_note"] for rows in on.values() for row in rows if row.get("telemetry_note")})
    for figure in figures:
        samples = [row.get("telemetry_samples") or 0 for row in on[figure["batch_size"]]]
        figure["timeline_samples"] = samples
        print(f"batch {figure['batch_size']}: off {figure['a_images_per_sec']:.2f}, on {figure['b_images_per_sec']:.2f}"
              f" images/s, ratio {figure['ratio_b_over_a']:.4f}, samples per run {samples}")
    for note in notes:
        print(f"note: {note}")
    energy = energy_checks(on)
    print(json.dumps({"pairs": args.pairs, "interval_s": args.interval, "figures": figures, "notes": notes,
                      "energy": energy}))
    return 0 if all(f["ratio_b_over_a"] >= args.threshold for f in figures) else 1


if __name__ == "__main__":
    raise SystemExit(main())
