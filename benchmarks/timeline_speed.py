"""How fast the nsys timeline analysis reduces an SQLite export, against reading the same rows bare.

Builds an export with the tables and columns the analysis reads (``--steps`` training steps of ``--kernels-per-step``
kernels, about ResNet-50's 860, spread over 4 streams that overlap, each launched by a runtime call, plus NVTX
step ranges and copies) in a temporary folder, then times, best of ``--repeats`` taken in turn:
``trainbench.analysis.timeline.summarize`` (busy fraction, per-step GPU time, top kernels, memcpy) and the bare
reads it cannot avoid (``pandas.read_sql`` of the kernel join, the runtime calls and the NVTX ranges). Fails (exit 1)
when the analysis takes more than ``--max-ratio`` times the bare reads. The last line is a JSON object.

    python benchmarks/timeline_speed.py [--steps 200] [--kernels-per-step 860]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

try:
    import trainbench  # noqa: F401
except ImportError:  # run from a plain checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "source"))

import numpy as np
import pandas as pd

from trainbench.analysis.timeline import summarize

PID = (1 << 48) | (4242 << 24)
TABLES = {
    "StringIds": "id INTEGER PRIMARY KEY, value TEXT NOT NULL",
    "CUPTI_ACTIVITY_KIND_KERNEL": "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
    "streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL, "
    "shortName INTEGER NOT NULL",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
    "streamId INTEGER NOT NULL, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "start INTEGER NOT NULL, end INTEGER NOT NULL, globalTid INTEGER, "
    "correlationId INTEGER, nameId INTEGER NOT NULL",
    "NVTX_EVENTS": "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, text TEXT, globalTid INTEGER, "
    "textId INTEGER",
}
BARE_READS = (
    "SELECT k.start, k.end, k.deviceId, k.streamId, COALESCE(d.value, s.value), k.correlationId, k.globalPid "
    "FROM CUPTI_ACTIVITY_KIND_KERNEL AS k LEFT JOIN StringIds AS d ON d.id = k.demangledName "
    "LEFT JOIN StringIds AS s ON s.id = k.shortName ORDER BY k.start",
    "SELECT globalTid, correlationId, start FROM CUPTI_ACTIVITY_KIND_RUNTIME",
    "SELECT start, end, text, textId FROM NVTX_EVENTS",
)


def build_export(path: Path, steps: int, per_step: int, seed: int = 0) -> int:
    """A synthetic export; returns the number of kernels."""
    rng = np.random.default_rng(seed)
    count = steps * per_step
    launch = np.cumsum(rng.integers(5_000, 15_000, count))  # CPU launch times, ns
    start = launch + rng.integers(20_000, 200_000, count)  # the GPU runs behind the host
    end = start + rng.integers(2_000, 60_000, count)
    names = rng.integers(1, 201, count)
    step_start = launch[::per_step] - 1_000
    step_end = np.append(step_start[1:] - 1, launch[-1] + 1_000)
    with closing(sqlite3.connect(path)) as conn:
        for table, columns in TABLES.items():
            conn.execute(f"CREATE TABLE {table} ({columns})")
        conn.executemany("INSERT INTO StringIds VALUES (?, ?)",
                         [(i, f"void kernel_{i}<float, 128>(Params)") for i in range(1, 201)]
                         + [(1000, "cudaLaunchKernel_v7000")])
        conn.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, ?, ?, ?, ?, ?)",
                         zip(start.tolist(), end.tolist(), (7 + np.arange(count) % 4).tolist(), range(count),
                             [PID] * count, names.tolist(), names.tolist(), strict=True))
        conn.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, 1000)",
                         zip(launch.tolist(), (launch + 3_000).tolist(), [PID | 4242] * count, range(count),
                             strict=True))
        conn.executemany("INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, ?, ?, NULL)",
                         [(int(s), int(e), f"step:{i}", PID | 4242)
                          for i, (s, e) in enumerate(zip(step_start, step_end, strict=True))])
        copies = start[::per_step]  # one input copy ahead of each step's first kernel
        conn.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, 0, 7, 1048576, 1)",
                         [(int(c) - 10_000, int(c) - 1_000) for c in copies])
        conn.commit()
    return count


def best_of(repeats: int, *functions: Callable[[], object]) -> list[float]:
    """Best wall time of each function, the functions taken in turn in every round."""
    best = [float("inf")] * len(functions)
    for _ in range(repeats):
        for i, function in enumerate(functions):
            began = time.perf_counter()
            function()
            best[i] = min(best[i], time.perf_counter() - began)
    return best


def bare_reads(path: Path) -> None:
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        for sql in BARE_READS:
            pd.read_sql(sql, conn)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--kernels-per-step", type=int, default=860)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-ratio", type=float, default=3.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "export.sqlite"
        kernels = build_export(path, args.steps, args.kernels_per_step)
        analysis_s, bare_s = best_of(args.repeats, lambda: summarize(path), lambda: bare_reads(path))
        summary = summarize(path)
    figures = {"kernels": kernels, "steps": summary["steps"], "analysis_s": round(analysis_s, 3),
               "bare_reads_s": round(bare_s, 3), "ratio": round(analysis_s / bare_s, 2),
               "kernels_per_s": round(kernels / analysis_s),
               "gpu_busy_fraction": round(summary["gpu_busy_fraction"], 4),
               # what summing kernel times would claim: above 1 whenever streams overlap
               "kernel_sum_over_window": round(summary["kernel_ns_sum"] / summary["window_ns"], 4)}
    print(f"{kernels:,} kernels: analysis {analysis_s:.3f} s, bare reads {bare_s:.3f} s, ratio {figures['ratio']}")
    print(json.dumps(figures))
    return 0 if figures["ratio"] <= args.max_ratio else 1


if __name__ == "__main__":
    raise SystemExit(main())
