"""A sweep over batch sizes, each in its own worker process, recorded as it goes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainbench.bench.launch import under_launcher, worker_command
from trainbench.bench.ranks import merge_ranks
from trainbench.bench.throughput_run import ThroughputRun
from trainbench.bench.worker import SWEEP_ENV, rate_text, sweep_identity
from trainbench.config import BenchConfig, ModelConfig, to_dict
from trainbench.render.console import format_table
from trainbench.render.plot import plot_memory, plot_throughput
from trainbench.render.telemetry_plot import plot_telemetry
from trainbench.results.failure import says_out_of_memory
from trainbench.results.files import create_run_dir, rank_files, write_json_atomic
from trainbench.results.header import Profiling, RunHeader, Timing
from trainbench.results.layout import (
    ENV,
    MEMORY_PLOT,
    TELEMETRY_PLOT,
    THROUGHPUT_PLOT,
    WORKER_CONFIG,
    WORKER_RESULT,
    batch_file,
    worker_file,
)
from trainbench.results.records import BatchResult, Status
from trainbench.results.store import RunStore
from trainbench.telemetry.env import collect_env
from trainbench.telemetry.schema import TELEMETRY_DIR


def death_result(batch_size: int, returncode: int, log_text: str) -> BatchResult:
    """The result of a worker that died without writing one (killed, segfault, hard OOM)."""
    if returncode < 0:
        cause = f"worker killed by {signal.Signals(-returncode).name}"
    else:
        cause = f"worker exited with status {returncode} without a result"
    lines = [line for line in log_text.splitlines() if line.strip()]
    detail = f" ({lines[-1].strip()[:200]})" if lines else ""
    status = Status.OOM if says_out_of_memory(log_text) else Status.ERROR
    return BatchResult.failed(batch_size, status, cause + detail)


@dataclass(frozen=True)
class WorkerOutcome:
    """One worker's end: the result recorded, its exit status (None when it was stopped) and the framework's
    versions it reported."""

    result: BatchResult
    returncode: int | None
    versions: dict[str, Any] = field(default_factory=dict)


def _signal_group(child: subprocess.Popen[bytes], signum: signal.Signals) -> None:
    """Signal the child's own session (run_worker starts one): the profiler, the worker and their helpers. Only
    while the child is unreaped, so the group id cannot belong to anyone else."""
    if child.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signum)


def stop_child(child: subprocess.Popen[bytes], grace_s: float = 30.0) -> None:
    """SIGTERM first: a profiler (ncu, nsys) then stops its target and writes what it has; SIGKILL if it lingers.
    Both go to the whole process group, so a worker under a profiler that was stopped does not run on."""
    _signal_group(child, signal.SIGTERM)
    try:
        child.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        _signal_group(child, signal.SIGKILL)
        child.wait()


THROUGHPUT_WORKER = "trainbench.bench.worker"
INTERRUPTED = "interrupted by the user"  # the error recorded for a batch size Ctrl-C or SIGTERM stopped


def run_worker(config: BenchConfig, run: RunStore, timeout_s: float | None = None,
               prefix: Sequence[str] = (), worker: str = THROUGHPUT_WORKER, *, timeline: bool = False,
               env: Mapping[str, str] | None = None) -> WorkerOutcome:
    """Measure one batch size in a child process (``python -m <worker>``) and add its result to ``run``.
    ``prefix`` is a command the worker runs under (a profiler); ``timeline``: the worker writes its GPU timeline
    to ``telemetry/batch_<X>.csv``; ``env``: variables set for the worker (CUDA_VISIBLE_DEVICES)."""
    batch = config.batch_size
    config_path = worker_file(run.path, batch, WORKER_CONFIG)
    result_path = worker_file(run.path, batch, WORKER_RESULT)
    write_json_atomic(config_path, to_dict(config))
    log_path = run.log_path(batch)
    command = [*prefix, *worker_command(config, worker), str(config_path), str(result_path)]
    if timeline:
        command.append(str(batch_file(run.path / TELEMETRY_DIR, batch, ".csv")))
    child: subprocess.Popen[bytes] | None = None
    # The worker watches this process through SWEEP_ENV and ends itself if the sweep dies, even by SIGKILL. Its own
    # session: stop_child can end the whole group (profiler, worker, helpers); Ctrl-C reaches it through stop_child.
    # CUDA_DEVICE_ORDER: CUDA numbers GPUs in NVML's (PCI) order, so a numeric CUDA_VISIBLE_DEVICES names the GPU
    # the telemetry reads (CUDA's default, FASTEST_FIRST, may differ on nodes of mixed GPUs). A user's value stays.
    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", **os.environ, **(env or {}), SWEEP_ENV: sweep_identity()}
    with open(log_path, "w", encoding="utf-8") as log:
        # Popen sits inside the try: a Ctrl-C that lands while the worker is being started is recorded too.
        try:
            child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                     start_new_session=True)
            returncode = child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            assert child is not None  # only wait() times out, and Popen had returned
            stop_child(child)
            result = BatchResult.failed(batch, Status.ERROR, f"timed out after {timeout_s} s")
            run.add(result)
            return WorkerOutcome(result, None)
        except KeyboardInterrupt:
            if child is not None:
                stop_child(child)
            run.add(BatchResult.failed(batch, Status.INTERRUPTED, INTERRUPTED))
            raise
    result, payload = _outcome(config, result_path, returncode, log_path)
    run.add(result, payload.get("warmup_s", ()), payload.get("step_s", ()))
    return WorkerOutcome(result, returncode, payload.get("versions", {}))


def _outcome(config: BenchConfig, result_path: Path, returncode: int,
             log_path: Path) -> tuple[BatchResult, dict[str, Any]]:
    """The batch size's result and the payload its step times come from (the lowest rank's): what the worker wrote,
    its ranks' results combined, or its death."""
    distributed = under_launcher(config) and config.launch.distributed  # a result file per rank
    paths = rank_files(result_path) if distributed else [result_path]
    payloads = [json.loads(path.read_text()) for path in paths if path.exists()]
    if not payloads:
        return death_result(config.batch_size, returncode, log_path.read_text(errors="replace")), {}
    if not distributed:
        return BatchResult.from_row(payloads[0]["result"]), payloads[0]
    ranks = [(payload["rank"], BatchResult.from_row(payload["result"])) for payload in payloads]
    result = merge_ranks(ranks, config.launch.world_size)
    if returncode and result.ok:  # a rank died without a result while the others wrote theirs
        return death_result(config.batch_size, returncode, log_path.read_text(errors="replace")), {}
    return result, payloads[0]


def run_sweep(
    configs: list[BenchConfig],
    run: ThroughputRun,
    echo: Callable[[str], None],
    timeout_s: float | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Run every configuration in order; return the framework versions a worker reported (for env.json)."""
    versions: dict[str, Any] = {}
    for config in configs:
        echo(f"batch size {config.batch_size}: running (log: {run.log_path(config.batch_size)})")
        outcome = run_worker(config, run, timeout_s, timeline=True, env=env)
        versions = versions or outcome.versions
        result = outcome.result
        if result.ok:
            echo(f"batch size {config.batch_size}: {rate_text(result.values, config.model.spec.sample_unit)}")
        else:
            echo(f"batch size {config.batch_size}: {result.status}: {result.error}")
    return versions


def run_header(config: BenchConfig, profiling: Profiling | None = None) -> RunHeader:
    """The header of a run of ``config``'s settings (any of its batch sizes): a throughput run's, with its timing,
    or a profile's (``profiling``), whose profiler window replaces the timing."""
    model = config.model
    timing = Timing(warmup_steps=config.warmup_steps, timed_steps=config.steps, windows=config.windows,
                    sync_every_step=config.sync_every_step, telemetry_interval_s=config.telemetry_interval_s)
    params = model.params()
    return RunHeader(framework=model.framework, precision=model.precision, device=model.device,
                     image_size=params.get("image_size"), data=config.data_label, model=to_dict(model),
                     optimizer=to_dict(config.optimizer),  # what the step updates with: compare holds it equal
                     workload=model.workload, sample_unit=model.spec.sample_unit, size=model.size, params=params,
                     launch=to_dict(config.launch),  # batch sizes are per process; images/s counts every process
                     timing=None if profiling else timing, profiling=profiling)


def measure_throughput(
    configs: list[BenchConfig],
    output: Path,
    echo: Callable[[str], None],
    timeout_s: float | None = None,
    run_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> ThroughputRun:
    """A whole sweep (one model configuration, several batch sizes) into a new run folder under ``output``, or into
    ``run_dir`` (a campaign's folder for this run, already made and empty); ``env``: set for every worker."""
    store, environment = start_run(configs[0], output, echo, run_dir, env)
    versions = run_sweep(configs, store, echo, timeout_s, env)
    finish_run(store, configs[0].model, environment, versions, echo)
    return store


def start_run(config: BenchConfig, output: Path, echo: Callable[[str], None], run_dir: Path | None = None,
              env: Mapping[str, str] | None = None) -> tuple[ThroughputRun, dict[str, Any]]:
    """A new run folder for ``config``'s settings (or ``run_dir``, made and empty) with its env.json and its
    header: what a sweep and a --max-batch search measure into. Returns the store and the environment recorded."""
    model = config.model
    run_dir = run_dir or create_run_dir(output, f"{model.framework}_{model.precision}_{model.device}")
    environment = collect_env(sys.argv, {**os.environ, **(env or {})})  # what the workers run with
    write_json_atomic(run_dir / ENV, environment)
    store = ThroughputRun(run_dir, run_header(config).to_json())
    echo(f"run folder: {run_dir}")
    return store, environment


def finish_run(store: ThroughputRun, model: ModelConfig, environment: dict[str, Any], versions: dict[str, Any],
               echo: Callable[[str], None]) -> None:
    """The framework's versions into env.json, the run's figures drawn and its table printed, by batch size (a
    search tries them out of order)."""
    run_dir = store.path
    write_json_atomic(run_dir / ENV, {**environment, "framework": versions})
    rows = sorted(store.rows(), key=lambda row: row["batch_size"])
    title = run_title(model)
    plot_throughput({model.framework: rows}, run_dir / THROUGHPUT_PLOT, title, model.spec.sample_unit)
    plot_memory({model.framework: rows}, run_dir / MEMORY_PLOT, title, model.spec.sample_unit)
    if plot_telemetry(run_dir / TELEMETRY_DIR, run_dir / TELEMETRY_PLOT, f"GPU telemetry: {title}"):
        echo(f"GPU timeline: {run_dir / TELEMETRY_PLOT}")
    echo(format_table(rows, model.spec.sample_unit))


def shape_text(model: ModelConfig) -> str:
    """The workload's shape settings as run, in words: "image 224px", "seq_len 128", with "tiny" when it is."""
    words = [f"image {value}px" if name == "image_size" else f"{name} {value}" for name, value in
             model.params().items() if name != "num_classes"]
    return ", ".join([*(["tiny"] if model.size != "full" else []), *words])


def run_title(model: ModelConfig) -> str:
    """"ResNet-50 torch fp32 on cuda, image 224px": a run's plots' title."""
    return f"{model.spec.title} {model.framework} {model.precision} on {model.device}, {shape_text(model)}"
