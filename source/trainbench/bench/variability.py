"""The same configuration on every visible GPU, with repetitions: the runs a GPU-to-GPU variability study compares.

Each (GPU, repetition) is an ordinary throughput run (``gpu<index>_rep<r>/``: summary, steps, telemetry, env.json)
whose workers see only that GPU (CUDA_VISIBLE_DEVICES set to its UUID). Repetitions are interleaved (every GPU's
repetition 0, then every GPU's repetition 1, ...) so a slow drift of the room or the node is spread over all GPUs
rather than charged to the last one. ``parallel`` runs every GPU of a repetition at once, as a busy node does
(shared power, cooling, host CPU); one after another (the default) isolates each GPU. The analysis is
``trainbench.analysis.variability``.

``--device cpu`` is a check of the plumbing (folders, isolation, report), not a comparison: each visible GPU's runs
train on the CPU, and with no GPU visible one stand-in, :data:`CPU_STAND_IN`, is "screened" instead.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trainbench.bench.sweep import measure_throughput
from trainbench.config import BenchConfig, to_dict
from trainbench.errors import UsageError
from trainbench.results.files import create_run_dir, write_json_atomic
from trainbench.telemetry.nvml import gpu_report, visible_gpu_indices
from trainbench.telemetry.schema import DEFAULT_OUTLIER_THRESHOLD, VARIABILITY_FILE, variability_run_name


@dataclass(frozen=True)
class ScreenedGpu:
    index: int  # NVML's
    uuid: str | None
    name: str | None

    @property
    def visible_as(self) -> str:
        """CUDA_VISIBLE_DEVICES for a worker on this GPU alone: its UUID (index order can differ from NVML's)."""
        return self.uuid or str(self.index)


# The one "GPU" of a --device cpu study on a machine that shows none: its runs see no GPU at all.
CPU_STAND_IN = ScreenedGpu(0, None, "CPU stand-in (no GPU)")


def worker_visible(gpu: ScreenedGpu) -> str:
    """CUDA_VISIBLE_DEVICES for the workers of ``gpu``'s runs: the CPU stand-in's see no GPU."""
    return "" if gpu == CPU_STAND_IN else gpu.visible_as


def gpus_to_screen(visible: str | None, device: str = "auto") -> list[ScreenedGpu]:
    """The GPUs CUDA shows this process (CUDA_VISIBLE_DEVICES honoured). None: with ``device`` "cpu" the CPU
    stand-in, else a UsageError."""
    report = gpu_report()
    indices = visible_gpu_indices(report["gpus"], visible)
    if not indices and device == "cpu":
        return [CPU_STAND_IN]
    if not indices:
        reason = report.get("unavailable") or f"CUDA_VISIBLE_DEVICES={visible!r} shows none of NVML's GPUs"
        raise UsageError(f"variability: no GPU to compare ({reason}); --device cpu checks the plumbing on the CPU")
    by_index = {gpu["index"]: gpu for gpu in report["gpus"]}
    return [ScreenedGpu(i, by_index[i].get("uuid"), by_index[i].get("name")) for i in indices]


def run_variability(configs: list[BenchConfig], gpus: Sequence[ScreenedGpu], output: Path,
                    echo: Callable[[str], None], repetitions: int, parallel: bool = False,
                    threshold: float = DEFAULT_OUTLIER_THRESHOLD, timeout_s: float | None = None) -> Path:
    """Every (GPU, repetition) run into a new folder under ``output``; returns the folder."""
    model = configs[0].model
    folder = create_run_dir(output, f"variability_{model.framework}_{model.precision}")
    plan: dict[str, Any] = {
        "host": socket.gethostname(),
        "gpus": [asdict(gpu) for gpu in gpus],
        "repetitions": repetitions,
        "parallel": parallel,
        "outlier_threshold": threshold,
        "batch_sizes": [config.batch_size for config in configs],
        "config": to_dict(configs[0]),
    }
    write_json_atomic(folder / VARIABILITY_FILE, plan)
    echo(f"variability folder: {folder}")
    for repetition in range(repetitions):
        jobs = [_job(configs, gpu, repetition, folder, echo, timeout_s) for gpu in gpus]
        if parallel:
            _all_at_once(jobs)
        else:
            for job in jobs:
                job()
    return folder


def _job(configs: list[BenchConfig], gpu: ScreenedGpu, repetition: int, folder: Path,
         echo: Callable[[str], None], timeout_s: float | None) -> Callable[[], None]:
    name = variability_run_name(gpu.index, repetition)

    def run() -> None:
        run_dir = folder / name
        run_dir.mkdir()
        def tagged(text: str) -> None:  # every line (tables too) names its run: parallel runs interleave
            echo("\n".join(f"[{name}] {line}" for line in text.splitlines()))

        measure_throughput(configs, folder, tagged, timeout_s, run_dir=run_dir,
                           env={"CUDA_VISIBLE_DEVICES": worker_visible(gpu)})

    return run


def _all_at_once(jobs: list[Callable[[], None]]) -> None:
    """Run the jobs in threads (each waits on its own worker process) and wait for all. Daemon threads: on Ctrl-C
    the command ends and each worker, watching the command's process, ends itself."""
    failures: list[BaseException] = []

    def guarded(job: Callable[[], None]) -> None:
        try:
            job()
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread below
            failures.append(error)

    threads = [threading.Thread(target=guarded, args=(job,), daemon=True) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(timeout=0.5)  # a join with a timeout lets Ctrl-C reach this thread
    if failures:
        raise failures[0]
