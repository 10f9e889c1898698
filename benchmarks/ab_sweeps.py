"""Two variants of the same ``trainbench throughput`` sweep, run alternately in one session: the shared part of the
suite's overhead benchmarks (telemetry_overhead.py, torchrun_overhead.py).

Interleaving (A, B, A, B, ...) spreads slow drift of the machine over both variants; each variant's images/s per
batch size is the median over its runs, and the ratio B / A is what the benchmarks report.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def sweep(options: list[str], output: Path) -> dict[int, dict[str, Any]]:
    """One throughput sweep; its ok results by batch size."""
    command = [sys.executable, "-m", "trainbench", "throughput", *options, "--output", str(output)]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    return {row["batch_size"]: row for row in summary["results"] if row["status"] == "ok"}


def interleaved(common: list[str], a: list[str], b: list[str], pairs: int,
                keep: Path | None = None) -> tuple[dict[int, list[dict[str, Any]]], dict[int, list[dict[str, Any]]]]:
    """``pairs`` runs of each variant, alternately: every run's result rows by batch size, for A and for B. The run
    folders go to ``keep`` (``a_0``, ``b_0``, ...) when given, else to a temporary folder."""
    rows: tuple[dict[int, list[dict[str, Any]]], ...] = ({}, {})
    with tempfile.TemporaryDirectory() as scratch:
        for pair in range(pairs):
            for side, extra in enumerate((a, b)):
                output = (keep or Path(scratch)) / f"{'ab'[side]}_{pair}"
                for batch, row in sweep([*common, *extra], output).items():
                    rows[side].setdefault(batch, []).append(row)
    return rows[0], rows[1]


def ratios(a: dict[int, list[dict[str, Any]]], b: dict[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per batch size both variants measured: their median images/s and the ratio B / A."""
    figures = []
    for batch in sorted(set(a) & set(b)):
        rates_a = [row["samples_per_sec"] for row in a[batch]]
        rates_b = [row["samples_per_sec"] for row in b[batch]]
        median_a, median_b = statistics.median(rates_a), statistics.median(rates_b)
        figures.append({"batch_size": batch, "a_images_per_sec": median_a, "b_images_per_sec": median_b,
                        "ratio_b_over_a": median_b / median_a, "a_all": rates_a, "b_all": rates_b})
    return figures
