"""One batch size, measured in a process of its own.

A fresh process per configuration keeps GPU memory unfragmented and cuDNN's choices independent, and lets an
out-of-memory failure or a crash end only this batch size. The parent reads the JSON this writes; if the process
dies without writing it, the parent records the death from the exit status and the log. If the parent dies, even
by SIGKILL, the worker ends itself (``exit_with_sweep``): nobody would record its result, and it would hold the GPU.
A profiled run's worker (``trainbench.profile.worker``) is this same process with another measurement.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, NoReturn

from trainbench.bench.input_bench import InputBench, is_input_bound, measure_input
from trainbench.bench.machine_load import MachineLoad
from trainbench.bench.memory import PeakMemory
from trainbench.bench.stats import summarize_windows
from trainbench.bench.timing import run_window
from trainbench.bench.trained import check_trained
from trainbench.bench.work import peak_of, runner_values
from trainbench.config import BenchConfig, bench_config_from_dict
from trainbench.engines import load_engine
from trainbench.engines.base import Engine
from trainbench.engines.input_batches import BEFORE_INPUT
from trainbench.engines.launchers import process_place
from trainbench.render.console import per_second
from trainbench.results.failure import failure_status, one_line
from trainbench.results.files import rank_file, write_json_atomic
from trainbench.results.peaks import arithmetic
from trainbench.results.records import BatchResult, Status
from trainbench.results.trust import trust_text
from trainbench.telemetry.nvml import gpu_state
from trainbench.telemetry.recorder import WindowTelemetry

SWEEP_ENV = "TRAINBENCH_SWEEP"  # "pid:start:pgid" of the sweep process that started this worker
EXIT_SWEEP_GONE = 3


def _proc_stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state first), or None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()


def _start_time(pid: int) -> str | None:
    """When the process started, in clock ticks after boot: with its pid, it names one process for good."""
    fields = _proc_stat(pid)
    return fields[19] if fields else None  # field 22 of proc(5)


def sweep_identity() -> str:
    """This process as SWEEP_ENV names it to the workers it starts."""
    return f"{os.getpid()}:{_start_time(os.getpid())}:{os.getpgid(0)}"


def _sweep_alive(pid: int, start: str) -> bool:
    fields = _proc_stat(pid)
    return fields is not None and fields[0] not in ("Z", "X") and fields[19] == start


def _sweep_gone(pid: int, group: int) -> NoReturn:
    os.write(2, f"worker: the sweep that started it (pid {pid}) is gone; stopping\n".encode())
    if os.getpgid(0) != group:  # a session of our own (see sweep.run_worker): the profiler and helpers go too
        os.killpg(0, signal.SIGKILL)
    os._exit(EXIT_SWEEP_GONE)


def _watch_sweep(pid: int, start: str, group: int, pidfd: int | None) -> None:
    if pidfd is not None:
        select.select([pidfd], [], [])  # readable once the process has ended
    else:
        while _sweep_alive(pid, start):
            time.sleep(1.0)
    _sweep_gone(pid, group)


def exit_with_sweep() -> None:
    """End this worker when the sweep named by SWEEP_ENV ends (Linux; nothing to do when run by hand). Checked at
    once, as the sweep may have died before this process started, then watched from a thread."""
    identity = os.environ.get(SWEEP_ENV)
    if not identity or not Path("/proc/self/stat").exists():
        return
    pid_text, start, group_text = identity.split(":")
    pid, group = int(pid_text), int(group_text)
    try:
        pidfd: int | None = os.pidfd_open(pid)  # opened first: then a start time that matches is that process's
    except ProcessLookupError:
        _sweep_gone(pid, group)
    except (AttributeError, OSError):  # no pidfd_open (old kernel, a container's seccomp): poll /proc instead
        pidfd = None
    if not _sweep_alive(pid, start):  # gone, or its pid already reused
        _sweep_gone(pid, group)
    threading.Thread(target=_watch_sweep, args=(pid, start, group, pidfd), name="exit-with-sweep", daemon=True).start()


def input_rate(config: BenchConfig) -> float:
    """The input pipeline alone, with the training window's step counts, before the model exists (so its workers
    have the machine to themselves and are gone before training starts): samples/s, in the workload's unit."""
    model = config.model
    BEFORE_INPUT[model.framework](model)
    params = model.params()
    bench = InputBench(model.framework, str(config.data), config.batch_size, params.get("image_size", 224),
                       max(1, config.warmup_steps), config.steps, seed=model.seed, loader=config.loader,
                       workload=model.workload, seq_len=params.get("seq_len"))
    result = measure_input(bench)
    rate = result["samples_per_sec"]
    tokens = f", {result['tokens_per_sec']:.0f} tokens/s" if "tokens_per_sec" in result else ""
    print(f"batch {config.batch_size}: input pipeline alone {rate:.2f} {per_second(model.spec.sample_unit)}{tokens}",
          flush=True)
    return rate


@dataclass(frozen=True)
class Measurement:
    """What a worker hands back to the sweep: the result and, for a timed run, every step's time."""

    result: BatchResult
    warmup_s: list[float] = field(default_factory=list)
    step_s: list[float] = field(default_factory=list)


Measure = Callable[[BenchConfig, Engine, Path | None], Measurement]  # the last: where the GPU timeline goes


def measure(config: BenchConfig, engine: Engine, timeline: Path | None = None, *,
            window_clock: Callable[[], float] = time.perf_counter,
            telemetry_clock: Callable[[], float] = time.monotonic) -> Measurement:
    """The timed windows of one batch size (after the input pipeline alone, with --data), with the GPUs'
    telemetry: energy and throttle counters at every window's edges, the sampled timeline into ``timeline``; and
    the machine's load (``bench.machine_load``), read at the edges nearest the window's clock. ``window_clock``
    times the windows, ``telemetry_clock`` stamps the counters and the timeline: tests pass one stand-in clock for
    both, the one their stand-in NVML counts energy by, so the figures do not depend on the machine's speed."""
    pipeline_rate = input_rate(config) if config.data is not None else None
    runner = engine.make_runner(config)
    compile_s = runner.compile_s  # torch --compile / --cuda-graph: done before any window
    if compile_s is not None:
        print(f"batch {config.batch_size}: step compiled in {compile_s:.1f} s (in no window)", flush=True)
    windows_text = f" x {config.windows} windows" if config.windows > 1 else ""
    print(f"batch {config.batch_size}: {config.warmup_steps} warm-up + {config.steps} timed steps{windows_text}",
          flush=True)
    telemetry = WindowTelemetry.open(config.model.device, timeline, config.telemetry_interval_s,
                                     every_gpu=engine.capabilities.drives_every_gpu,
                                     local_rank=process_place().local_rank, clock=telemetry_clock)
    load = MachineLoad()
    memory = PeakMemory(runner)
    scales: list[float | None] = []

    def window_start(index: int) -> None:
        """A window's start edge, untimed. The first one also sets the warm-up's losses aside and starts the loss
        scale's and the memory's watch afresh."""
        if index == 0:
            runner.take_losses()
            scales.append(runner.loss_scale())
            memory.start()
        telemetry.window_start(index)
        load.window_start()

    def window_end(index: int) -> None:
        load.window_end()
        telemetry.window_end(index)

    try:
        # One warm-up, then the windows back to back: each synchronised at both edges, each its own images/s sample.
        windows = [run_window(runner, config.warmup_steps if i == 0 else 0, config.steps,
                              sync_every_step=config.sync_every_step, after_step=telemetry.step_hooks,
                              at_start=partial(window_start, i), at_end=partial(window_end, i), clock=window_clock)
                   for i in range(config.windows)]
        check_trained(runner.take_losses(), config.steps, scales[0], runner.loss_scale())
        memory_values = memory.values()
    finally:
        telemetry.close()
        _close(runner)
    samples = runner.samples_per_step * config.steps * config.windows
    values = {**summarize_windows(runner.samples_per_step, windows), "gpus_at_window_end": gpu_state(),
              "compile_s": compile_s, **runner.step_record, **memory_values,
              **telemetry.values([window.window_s for window in windows], samples), **load.values()}
    if load.note:
        print(f"batch {config.batch_size}: {load.note}", flush=True)
    model = config.model
    peak = peak_of(model.device, [gpu.name for gpu in telemetry.gpus], arithmetic(model.precision,
                                                                                   model.matmul_precision))
    values.update(runner_values(runner, values["samples_per_sec"], peak))
    if pipeline_rate is not None:
        values["input_samples_per_sec"] = pipeline_rate
        values["input_bound"] = is_input_bound(pipeline_rate, values["samples_per_sec"])
    print(f"batch {config.batch_size}: {rate_text(values, config.model.spec.sample_unit)}{_energy_text(values)}",
          flush=True)
    if trust := trust_text(values):
        print(f"batch {config.batch_size}: trust: {trust}", flush=True)
    return Measurement(BatchResult(config.batch_size, Status.OK, None, values), list(windows[0].warmup_s),
                       [seconds for window in windows for seconds in window.step_s])


def _close(runner: object) -> None:
    """The runner's own input pipeline stopped now, where it has one to stop (torch's ``close``): a loader
    thread still inside CUDA at interpreter exit can crash a process whose result is good."""
    close = getattr(runner, "close", None)
    if close is not None:
        close()


def rate_text(values: dict[str, Any], sample_unit: str) -> str:
    """"812.40 images/s", with tokens/s and MFU where the result has them."""
    text = f"{values['samples_per_sec']:.2f} {per_second(sample_unit)}"
    if values.get("tokens_per_sec") is not None:
        text += f", {values['tokens_per_sec']:.0f} tokens/s"
    if values.get("mfu") is not None:
        text += f", MFU {100 * values['mfu']:.1f} %"
    return text


def _energy_text(values: dict[str, Any]) -> str:
    joules = values.get("joules_per_sample")
    return f", {joules:.3f} J/sample at {values['mean_power_w']:.0f} W" if joules is not None else ""


def run(config: BenchConfig, how: Measure = measure, timeline: Path | None = None) -> dict[str, Any]:
    """The worker's payload: its measurement, or the failure it met, and the framework's versions."""
    engine = load_engine(config.model.framework)
    try:
        done = how(config, engine, timeline)
    except Exception as error:  # noqa: BLE001 - every failure becomes a recorded result, the sweep goes on
        traceback.print_exc()
        done = Measurement(BatchResult.failed(config.batch_size, failure_status(error), one_line(error)))
    return {"result": done.result.to_row(), "warmup_s": done.warmup_s, "step_s": done.step_s,
            "versions": engine.versions()}


def main(argv: list[str], how: Measure = measure) -> int:
    """``python -m <worker module> CONFIG_JSON RESULT_JSON [TIMELINE_CSV]``: measure with ``how``, write the
    payload (and the GPU timeline, when a path is given)."""
    exit_with_sweep()
    config_path, result_path, *timeline = (Path(arg) for arg in argv)
    config = bench_config_from_dict(json.loads(config_path.read_text()))
    place = process_place()
    rank = place.rank if place.ranked else None
    if rank is not None:  # one of the launcher's processes: files of its own
        result_path = rank_file(result_path, rank)
        if rank:  # rank 0's timeline keeps the plain name: telemetry.png draws it
            timeline = [rank_file(path, rank) for path in timeline]
    payload = {**run(config, how, timeline[0] if timeline else None), "rank": rank}
    write_json_atomic(result_path, payload)
    return 0 if payload["result"]["status"] == Status.OK else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
