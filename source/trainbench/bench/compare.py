"""Compare two throughput runs batch size by batch size, with a significance test on their step times.

As pyperf's ``compare_to``: a difference is called significant only when the two samples are unlikely to come from
one distribution (two-sided Mann-Whitney U test, no normality assumed). The samples are the windows' own images/s
when both runs timed at least MIN_WINDOWS windows per batch size (``--repeats``), else the per-step intervals of
each run's ``steps.csv`` (which are correlated in time, so their test is the weaker one). Throughput is each run's
images / timed wall time.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from scipy.stats import mannwhitneyu

from trainbench.errors import UsageError

COLUMNS = ["batch_size", "images_per_sec_a", "images_per_sec_b", "change_pct", "p_value", "significant", "sample"]
MIN_WINDOWS = 3  # with fewer, Mann-Whitney cannot reach p < 0.1 on windows alone


def load_run(run_dir: Path) -> tuple[dict, pd.DataFrame]:
    """(summary, timed steps) of a run folder; a clear UsageError when it is not one."""
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
        steps = pd.read_csv(run_dir / "steps.csv")
        results = summary["results"]
    except (OSError, ValueError, KeyError) as error:
        raise UsageError(f"{run_dir}: not a throughput run folder ({type(error).__name__}: {error})") from None
    return {r["batch_size"]: r for r in results}, steps[steps["phase"] == "timed"]


def compare_runs(run_a: Path, run_b: Path, alpha: float = 0.05) -> pd.DataFrame:
    """One row per batch size measured successfully in both runs; change_pct is B's images/s over A's."""
    results_a, steps_a = load_run(run_a)
    results_b, steps_b = load_run(run_b)
    rows = []
    for batch in sorted(set(results_a) & set(results_b)):
        a, b = results_a[batch], results_b[batch]
        if a["status"] != "ok" or b["status"] != "ok":
            continue
        windows_a, windows_b = a.get("window_images_per_sec") or [], b.get("window_images_per_sec") or []
        if min(len(windows_a), len(windows_b)) >= MIN_WINDOWS:
            sample, values_a, values_b = "windows", windows_a, windows_b
        else:
            sample = "steps"
            values_a = steps_a.loc[steps_a["batch_size"] == batch, "seconds"]
            values_b = steps_b.loc[steps_b["batch_size"] == batch, "seconds"]
        p_value = float(mannwhitneyu(values_a, values_b, alternative="two-sided").pvalue)
        rows.append({
            "batch_size": batch,
            "images_per_sec_a": a["images_per_sec"],
            "images_per_sec_b": b["images_per_sec"],
            "change_pct": 100.0 * (b["images_per_sec"] / a["images_per_sec"] - 1.0),
            "p_value": p_value,
            "significant": p_value < alpha,
            "sample": sample,
        })
    return pd.DataFrame(rows, columns=COLUMNS)
