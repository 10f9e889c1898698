"""The images/s against batch size plot (PNG)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def plot_throughput(series: dict[str, Sequence[dict[str, Any]]], path: Path, title: str) -> None:
    """One line per labelled sweep; failed batch sizes are marked on the x axis so a gap is never silent."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and in containers
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=120)
    sizes: set[int] = set()
    for label, results in series.items():
        ok = [r for r in results if r["status"] == "ok"]
        axes.plot([r["batch_size"] for r in ok], [r["images_per_sec"] for r in ok], marker="o", label=label)
        sizes.update(r["batch_size"] for r in results)
        for r in results:
            if r["status"] != "ok":
                axes.axvline(r["batch_size"], color="tab:red", linestyle=":", linewidth=1)
                axes.annotate(f"{label}: {r['status']}", (r["batch_size"], 0), color="tab:red", rotation=90,
                              va="bottom", ha="right", fontsize=8)
    axes.set_xscale("log", base=2)
    axes.set_xticks(sorted(sizes), [str(size) for size in sorted(sizes)])
    axes.legend()
    axes.set_ylim(bottom=0)
    axes.set_xlabel("batch size (images per step)")
    axes.set_ylabel("images/s (images / timed window)")
    axes.set_title(title)
    axes.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
