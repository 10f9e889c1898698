"""A profiled sweep: for each batch size a worker runs the window under the chosen profiler, then the profiler's
output is reduced to one summary row. Results go to a new folder (``profiled_data_<profiler>``, numbered when that
name is taken) and are rewritten after every batch size, so an interrupted sweep keeps what it finished.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from trainbench.bench.sweep import run_header, run_worker
from trainbench.config import FRAMEWORK_PROFILERS, GPU_PROFILERS, BenchConfig, ProfileConfig, problems, refuse, to_dict
from trainbench.errors import UsageError
from trainbench.profile.framework import FrameworkProfiler, trace_dir_for
from trainbench.profile.gpu_target import GpuTarget, query_gpu
from trainbench.profile.ncu import Ncu
from trainbench.profile.nsys import Nsys
from trainbench.profile.nvprof import Nvprof
from trainbench.profile.tools import Profiler
from trainbench.render.console import workload_title
from trainbench.render.plot import plot_against_batch_size
from trainbench.results.files import create_fresh_dir, write_json_atomic
from trainbench.results.header import Profiling
from trainbench.results.layout import ENV, PROFILE, PROFILE_PLOT, profile_folder
from trainbench.results.records import Status
from trainbench.results.store import RunStore
from trainbench.telemetry.env import collect_env

PROFILE_WORKER = "trainbench.profile.worker"
LOG_HEAD_CHARS = 1 << 20


def make_profiler(name: str, metrics: list[str] | None = None, clock_control: str = "base") -> Profiler:
    if name == "ncu":
        return Ncu(metrics, clock_control)
    if name == "nsys":
        return Nsys()
    if name == "nvprof":
        return Nvprof()
    return FrameworkProfiler(name)


class ProfileRun(RunStore):
    """profile.json (settings and every batch size's record), summary.csv (one row per batch size), logs/."""

    summary_name = PROFILE

    def __init__(self, path: Path, header: dict[str, Any], fields: Sequence[str]) -> None:
        super().__init__(path, header, ("batch_size", "status", *fields, "profiled_iterations", "error"))


def check_profiler(name: str, profiler: Profiler, configs: Sequence[BenchConfig], log_dir: Path) -> GpuTarget | None:
    """Everything that would make the whole sweep fail, checked before anything runs."""
    # Judged on 'auto': an explicit --device cpu was refused where the device was asked for (the command, the
    # campaign's filter); one resolved to the CPU is only noted, since nvidia-smi may list a GPU NVML hides.
    refuse(problems(configs[0].model, device="auto", launch=configs[0].launch, profiler=name))
    gpu = query_gpu(name) if name in GPU_PROFILERS else None
    profiler.prepare(gpu, log_dir)
    return gpu


def with_window(config: BenchConfig, window: ProfileConfig, run_dir: Path) -> BenchConfig:
    trace_dir = str(trace_dir_for(run_dir.resolve(), config.batch_size)) if window.tool in FRAMEWORK_PROFILERS else None
    return dataclasses.replace(config, profile=dataclasses.replace(window, trace_dir=trace_dir))


def profiler_log_text(prefix: Sequence[str]) -> str:
    """What the profiler wrote to its ``--log-file`` (ncu, nvprof): there go all of its own messages,
    ERR_NVGPUCTRPERM included, rather than to the worker's log; "" when it has none."""
    if "--log-file" not in prefix[:-1]:
        return ""
    path = Path(prefix[list(prefix).index("--log-file") + 1])
    if not path.is_file():
        return ""
    with open(path, encoding="utf-8", errors="replace") as log:
        return log.read(LOG_HEAD_CHARS)  # the messages precede the table, which can be hundreds of MB


def profile_batch(config: BenchConfig, profiler: Profiler, store: ProfileRun, timeout_s: float | None) -> None:
    """One batch size: the worker under the profiler, then its analysis; a failure is recorded, never raised,
    except a refusal that every batch size would meet (counter permissions)."""
    batch = config.batch_size
    prefix = profiler.command(store.path, batch)
    outcome = run_worker(config, store, timeout_s, prefix=prefix, worker=PROFILE_WORKER)
    log_text = store.log_path(batch).read_text(errors="replace")
    refusal = profiler.explain_failure(log_text + profiler_log_text(prefix))
    if refusal is not None:
        store.replace_last(store.last.replace(status=Status.ERROR, error=refusal))
        raise UsageError(refusal)
    if not outcome.result.ok:
        return
    try:
        store.replace_last(store.last.replace(**profiler.analyze(store.path, batch)))
    except UsageError as error:
        store.replace_last(store.last.replace(status=Status.ERROR, error=str(error)))
    if outcome.returncode != 0 and store.last.ok:
        store.replace_last(store.last.replace(
            error=f"{profiler.name} exited with status {outcome.returncode} (see the log)"))


def run_profile(
    window: ProfileConfig,
    configs: list[BenchConfig],
    output: Path,
    echo: Callable[[str], None],
    metrics: list[str] | None = None,
    timeout_s: float | None = None,
    clock_control: str = "base",
) -> ProfileRun:
    profiler = make_profiler(window.tool, metrics, clock_control)
    run_dir = create_fresh_dir(output, profile_folder(window.tool))
    try:
        gpu = check_profiler(window.tool, profiler, configs, run_dir)
    except UsageError:
        if not any(run_dir.iterdir()):
            run_dir.rmdir()  # nothing ran: leave no empty folder behind
        raise
    profiling = Profiling(window.tool, to_dict(window), dataclasses.asdict(gpu) if gpu else None,
                          getattr(profiler, "metrics", None), getattr(profiler, "clock_control", None))
    header = run_header(configs[0], profiling).to_json()
    write_json_atomic(run_dir / ENV, collect_env(sys.argv))
    store = ProfileRun(run_dir, header, profiler.summary_fields)
    echo(f"profile folder: {run_dir}")
    if gpu is not None and configs[0].model.device == "cpu":
        echo(f"note: nvidia-smi lists {gpu.name} but no GPU is visible to this process (NVML): the worker runs on "
             f"the CPU and {window.tool} will record no GPU work")
    for config in configs:
        echo(f"batch size {config.batch_size}: {window.tool} over iterations {window.start_iteration}.."
             f"{window.stop_iteration - 1} (log: {store.log_path(config.batch_size)})")
        profile_batch(with_window(config, window, run_dir), profiler, store, timeout_s)
        result = store.last
        detail = f": {result.error}" if result.error else ""
        echo(f"batch size {config.batch_size}: {result.status}{detail}")
        plot_profile(profiler, store, window)
    return store


def plot_profile(profiler: Profiler, store: ProfileRun, window: ProfileConfig) -> None:
    """summary.png, redrawn after every batch size like summary.csv."""
    if not profiler.plot_fields:
        return
    header = store.header
    network = workload_title(header.get('workload'), header.get('size'))
    title = (f"{network} {header['framework']} {header['precision']}, {window.tool}, "
             "iterations "
             f"{window.start_iteration}..{window.stop_iteration - 1}")
    rows = store.rows()
    lines = {label: (rows, field) for label, field in profiler.plot_fields}
    plot_against_batch_size(lines, store.path / PROFILE_PLOT, title, profiler.plot_ylabel,
                            str(header.get("sample_unit") or "image"))
