"""How fast coreutil reads an ncu details CSV, against pandas' bare read and a naive per-launch filter.

Generates a details CSV (``--launches`` launches, 5 metrics each incl. the weight ``gpc__cycles_elapsed.max``,
thousands separators, a ``==PROF==`` preamble) in a temporary folder and times, in-process with imports
excluded (best of ``--repeats``, the two taken in turn): coreutil's full computation (read, pivot, weights,
means, per-kernel table) and ``pandas.read_csv`` of the same file; then a naive implementation in the style of
the original script (for each launch ID, filter the whole DataFrame). The naive one grows with the square of the
launch count, so it is timed on smaller files and extrapolated with a fitted quadratic. Fails (exit 1) unless
coreutil is within ``--max-read-ratio`` of the bare read and at least ``--min-naive-ratio`` times faster than
the naive version. The last line of the output is a JSON object with every figure.

    python benchmarks/coreutil_speed.py [--launches 20000] [--naive-sizes 500,1000,2000]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

try:
    import trainbench  # noqa: F401
except ImportError:  # run from a plain checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "source"))

import numpy as np
import pandas as pd

from trainbench.analysis.coreutil import analyze_file

HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
)
PREAMBLE = ["==PROF== Connected to process 4242 (/usr/bin/python3.12)", "==PROF== Disconnected from process 4242"]
WEIGHT = "gpc__cycles_elapsed.max"
PIPES = [f"sm__inst_executed_pipe_{p}.avg.pct_of_peak_sustained_elapsed" for p in ("fma", "fp16", "tensor", "xu")]
KERNELS = [
    f"void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_{i}x128_32x3_nn_align4>(T1::Params, int, float, __half)"
    for i in (64, 128, 256)
] + ["void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float>>(int, T2)"]


def write_profile(path: Path, launches: int, seed: int = 0) -> None:
    """A details-page CSV as ncu 2023+ prints it: every field quoted, counters with thousands separators."""
    rng = np.random.default_rng(seed)
    cycles = rng.integers(1_000, 50_000_000, size=launches)
    pct = rng.uniform(0, 100, size=(launches, len(PIPES)))
    lines = [*PREAMBLE, HEADER]
    for launch in range(launches):
        prefix = (f'"{launch}","4242","python3.12","127.0.0.1","{KERNELS[launch % len(KERNELS)]}","1","7",'
                  f'"(128, 1, 1)","(512, 1, 1)","0","8.0","Command line profiler metrics",')
        lines.append(f'{prefix}"{WEIGHT}","cycle","{cycles[launch]:,}"')
        lines.extend(f'{prefix}"{name}","%","{value:.2f}"' for name, value in zip(PIPES, pct[launch], strict=True))
    path.write_text("\n".join(lines) + "\n")


def naive_coreutil(path: Path) -> dict[str, float]:
    """The original's algorithm (last launch included, separators handled): one full-table filter per launch."""
    table = pd.read_csv(path, skiprows=len(PREAMBLE))

    def value(kernel: pd.DataFrame, metric: str) -> float:
        return float(str(kernel[kernel["Metric Name"] == metric]["Metric Value"].iloc[0]).replace(",", ""))

    totals = dict.fromkeys(PIPES, 0.0)
    weight_sum = 0.0
    for launch in range(int(table["ID"].max()) + 1):
        kernel = table[table["ID"] == launch]
        cycles = value(kernel, WEIGHT)
        weight_sum += cycles
        for metric in PIPES:
            totals[metric] += value(kernel, metric) * cycles
    return {metric: total / weight_sum for metric, total in totals.items()}


def best_times(functions: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Best of ``repeats`` for each function, run in turn so that a busy machine slows all of them alike."""
    timings: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(repeats):
        for name, function in functions.items():
            start = time.perf_counter()
            function()
            timings[name].append(time.perf_counter() - start)
    return {name: min(values) for name, values in timings.items()}


def time_naive(folder: Path, sizes: list[int]) -> dict[int, float]:
    """Seconds the naive version takes per launch count, each run also checked against coreutil's figures."""
    timings = {}
    for size in sizes:
        path = folder / f"naive_{size}.csv"
        write_profile(path, size, seed=size)
        start = time.perf_counter()
        expected = naive_coreutil(path)
        timings[size] = time.perf_counter() - start
        _check_agreement(path, expected)
    return timings


def _check_agreement(path: Path, expected: dict[str, float]) -> None:
    """The naive figures must equal coreutil's, or comparing their times would mean nothing."""
    result = analyze_file(path)
    for metric, value in expected.items():
        if not np.isclose(result.metrics[metric], value, rtol=1e-9):
            raise SystemExit(f"coreutil and the naive version disagree on {metric}: {result.metrics[metric]} {value}")


def fit_quadratic(timings: dict[int, float]) -> np.ndarray:
    """(a, b, c) of t = a + b n + c n^2, least squares with every coefficient >= 0.

    A plain fit through three noisy points can bend down and predict negative times; no part of the naive
    algorithm gets cheaper with more launches, so the best non-negative fit (over all subsets of terms) is used.
    """
    n = np.array(list(timings), dtype=float)
    t = np.array(list(timings.values()))
    basis = np.stack([np.ones_like(n), n, n**2], axis=1)
    best, best_error = np.zeros(3), float(np.sum(t**2))
    for terms in itertools.product([False, True], repeat=3):
        chosen = np.array(terms)
        if not chosen.any():
            continue
        solution = np.linalg.lstsq(basis[:, chosen], t, rcond=None)[0]
        coefficients = np.zeros(3)
        coefficients[chosen] = solution
        error = float(np.sum((basis @ coefficients - t) ** 2))
        if (coefficients >= 0).all() and error < best_error:
            best, best_error = coefficients, error
    return best


def extrapolate(coefficients: np.ndarray, launches: int) -> float:
    return float(coefficients @ np.array([1.0, launches, float(launches) ** 2]))


def goals_met(coreutil_over_read: float, naive_over_coreutil: float, args: argparse.Namespace) -> bool:
    """Both goals: coreutil within ``--max-read-ratio`` of the bare read, ``--min-naive-ratio`` times the naive."""
    return coreutil_over_read <= args.max_read_ratio and naive_over_coreutil >= args.min_naive_ratio


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launches", type=int, default=20_000, help="launches in the main file (default 20000)")
    parser.add_argument("--naive-sizes", default="500,1000,2000", help="launch counts the naive version runs on")
    parser.add_argument("--repeats", type=int, default=7, help="timings per measurement; the best is kept")
    parser.add_argument("--max-read-ratio", type=float, default=2.5)
    parser.add_argument("--min-naive-ratio", type=float, default=100.0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = [int(size) for size in args.naive_sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="coreutil_speed_") as tmp:
        folder = Path(tmp)
        path = folder / "profile.csv"
        write_profile(path, args.launches)
        analyze_file(path)  # warm-up: pandas' lazy imports and caches are not what is measured
        pd.read_csv(path, skiprows=len(PREAMBLE))
        best = best_times(
            {"coreutil": lambda: analyze_file(path), "read": lambda: pd.read_csv(path, skiprows=len(PREAMBLE))},
            args.repeats,
        )
        coreutil_s, read_s = best["coreutil"], best["read"]
        naive_measured = time_naive(folder, sizes)
        size_mb = path.stat().st_size / 1e6
    coefficients = fit_quadratic(naive_measured)
    naive_s = extrapolate(coefficients, args.launches)
    results = {
        "launches": args.launches,
        "rows": args.launches * (len(PIPES) + 1),
        "file_mb": round(size_mb, 2),
        "coreutil_s": coreutil_s,
        "read_s": read_s,
        "naive_s": naive_s,
        "naive_extrapolated_from": {str(n): t for n, t in naive_measured.items()},
        "naive_fit_a_b_c": [float(c) for c in coefficients],
        "coreutil_over_read": coreutil_s / read_s,
        "naive_over_coreutil": naive_s / coreutil_s,
    }
    results["ok"] = goals_met(results["coreutil_over_read"], results["naive_over_coreutil"], args)
    _report(results, args)
    return 0 if results["ok"] else 1


def _report(results: dict[str, object], args: argparse.Namespace) -> None:
    measured = ", ".join(f"{n}: {t:.3f} s" for n, t in results["naive_extrapolated_from"].items())  # type: ignore[union-attr]
    print(f"file: {results['launches']} launches, {results['rows']} rows, {results['file_mb']} MB")
    print(f"coreutil (full computation): {results['coreutil_s']:.3f} s")
    print(f"pandas read_csv (bare read): {results['read_s']:.3f} s")
    print(f"naive per-launch filter:     {results['naive_s']:.1f} s "
          f"(extrapolated to {results['launches']} launches "
          f"with a + b n + c n^2 fitted to the measured {measured})")
    if results["naive_fit_a_b_c"][2] == 0:  # type: ignore[index]
        print("  (the n^2 term fitted to 0 at these sizes, so this extrapolation is linear: a lower bound)")
    print(f"coreutil / read  = {results['coreutil_over_read']:.2f} (limit {args.max_read_ratio})")
    print(f"naive / coreutil = {results['naive_over_coreutil']:.0f} (at least {args.min_naive_ratio:.0f})")
    print(json.dumps(results))


if __name__ == "__main__":
    raise SystemExit(main())
