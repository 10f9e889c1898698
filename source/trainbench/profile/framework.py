"""The frameworks' own profilers over the same window: torch.profiler and TensorFlow's profiler.

Both run on the CPU as well as on a GPU, so a user without a GPU can still see where a step's time goes.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from trainbench.config import ProfileConfig
from trainbench.errors import UsageError
from trainbench.results.csv_cells import neutral_rows
from trainbench.results.layout import batch_file

TORCH_TRACE = "trace.json"  # Chrome trace: chrome://tracing, Perfetto, or TensorBoard's profile plugin
TORCH_OPERATORS = "operators.csv"
TORCH_OPERATORS_TABLE = "operators.txt"
OPERATOR_FIELDS = ("name", "calls", "self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us")


def _first_attribute(event: Any, *names: str) -> float:
    """key_averages() renamed its CUDA fields to 'device' in torch 2.4; read whichever this torch has."""
    for name in names:
        if hasattr(event, name):
            return float(getattr(event, name))
    return 0.0


def operator_rows(averages: Any) -> list[dict[str, Any]]:
    rows = [
        {
            "name": event.key,
            "calls": event.count,
            "self_cpu_us": event.self_cpu_time_total,
            "cpu_total_us": event.cpu_time_total,
            "self_device_us": _first_attribute(event, "self_device_time_total", "self_cuda_time_total"),
            "device_total_us": _first_attribute(event, "device_time_total", "cuda_time_total"),
        }
        for event in averages
    ]
    return sorted(rows, key=lambda row: row["self_cpu_us"] + row["self_device_us"], reverse=True)


class TorchProfilerHooks:
    """torch.profiler on a schedule whose active steps are exactly the window; its steps are numbered from
    iteration 0, so the trace's ``ProfilerStep#N`` is iteration N."""

    def __init__(self, trace_dir: Path, window: ProfileConfig, cuda: bool) -> None:
        import torch

        self.trace_dir = trace_dir
        profiler = torch.profiler
        warmup = 1 if window.start_iteration >= 1 else 0  # the profiler's own warm-up, never recorded
        schedule = profiler.schedule(skip_first=window.start_iteration - warmup, wait=0, warmup=warmup,
                                     active=window.iterations, repeat=1)
        activities = [profiler.ProfilerActivity.CPU] + ([profiler.ProfilerActivity.CUDA] if cuda else [])
        self.profiler = profiler.profile(activities=activities, schedule=schedule, on_trace_ready=self._write)

    def _write(self, profiler: Any) -> None:
        profiler.export_chrome_trace(str(self.trace_dir / TORCH_TRACE))
        averages = profiler.key_averages()
        rows = operator_rows(averages)
        with open(self.trace_dir / TORCH_OPERATORS, "w", newline="", encoding="utf-8") as out:
            writer = csv.DictWriter(out, fieldnames=OPERATOR_FIELDS)
            writer.writeheader()
            writer.writerows(neutral_rows(rows))
        (self.trace_dir / TORCH_OPERATORS_TABLE).write_text(averages.table(sort_by="self_cpu_time_total",
                                                                           row_limit=40))

    def begin_step(self, iteration: int) -> None:
        if iteration == 0:
            self.profiler.start()

    def end_step(self, iteration: int) -> None:
        self.profiler.step()

    def begin_window(self) -> None:
        pass

    def end_window(self) -> None:
        self.profiler.stop()


class TfProfilerHooks:
    """TensorFlow's profiler started and stopped at the window's edges, each step a ``train`` trace event with its
    iteration number (TensorBoard's step-time view groups by it). Output: a TensorBoard log folder."""

    def __init__(self, trace_dir: Path) -> None:
        import tensorflow as tf

        self.trace_dir = trace_dir
        self.experimental = tf.profiler.experimental
        self.inside = False
        self.trace: Any = None

    def begin_step(self, iteration: int) -> None:
        if self.inside:
            self.trace = self.experimental.Trace("train", step_num=iteration, _r=1)
            self.trace.__enter__()

    def end_step(self, iteration: int) -> None:
        if self.trace is not None:
            self.trace.__exit__(None, None, None)
            self.trace = None

    def begin_window(self) -> None:
        self.experimental.start(str(self.trace_dir))
        self.inside = True

    def end_window(self) -> None:
        self.inside = False
        self.experimental.stop()


def trace_dir_for(run_dir: Path, batch_size: int) -> Path:
    return batch_file(run_dir, batch_size)


class FrameworkProfiler:
    """torch or tf as a profiler of the run: in the worker's own process, so no command is wrapped around it."""

    summary_fields: tuple[str, ...] = ("trace", "top_operator")
    plot_fields: tuple[tuple[str, str], ...] = ()
    plot_ylabel = ""

    def __init__(self, name: str) -> None:
        self.name = name

    def prepare(self, gpu: object, log_dir: Path) -> None:
        pass

    def command(self, run_dir: Path, batch_size: int) -> list[str]:
        return []

    def analyze(self, run_dir: Path, batch_size: int) -> dict[str, Any]:
        trace_dir = trace_dir_for(run_dir, batch_size)
        if self.name == "tf":
            traces = sorted(trace_dir.glob("plugins/profile/*/*.xplane.pb"))
            if not traces:
                raise UsageError(f"{trace_dir}: TensorFlow's profiler wrote no trace")
            return {"trace": str(traces[-1].relative_to(run_dir)), "top_operator": None}
        trace = trace_dir / TORCH_TRACE
        if not trace.exists():
            raise UsageError(f"{trace}: torch.profiler wrote no trace")
        with open(trace_dir / TORCH_OPERATORS, newline="", encoding="utf-8") as table:
            operators = [row["name"] for row in csv.DictReader(table) if not row["name"].startswith("ProfilerStep")]
        return {"trace": str(trace.relative_to(run_dir)), "top_operator": operators[0] if operators else None}

    def explain_failure(self, text: str) -> str | None:
        return None
