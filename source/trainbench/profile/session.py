"""The worker's side of a profiled run: the hooks a profiler needs, the window run, and its record."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from trainbench.bench.stats import samples_per_sec
from trainbench.config import FRAMEWORK_PROFILERS, BenchConfig, ProfileConfig, profiler_problem
from trainbench.engines.base import StepRunner
from trainbench.errors import UsageError
from trainbench.frameworks import capabilities_of
from trainbench.profile.framework import TfProfilerHooks, TorchProfilerHooks
from trainbench.profile.markers import markers_for
from trainbench.profile.window import CaptureHooks, WindowHooks, WindowRecorder, profile_window
from trainbench.results.records import BatchResult, Status

# The frameworks' own profilers, by their --profiler name (each is named after its framework, config.Profiler):
# (trace folder, window, device) -> the hooks that run it in the worker's process.
_FRAMEWORK_HOOKS: dict[str, Callable[[Path, ProfileConfig, str], WindowHooks]] = {
    "torch": lambda trace_dir, window, device: TorchProfilerHooks(trace_dir, window, cuda=device == "cuda"),
    "tf": lambda trace_dir, window, device: TfProfilerHooks(trace_dir),
}


def framework_hooks(window: ProfileConfig, framework: str, device: str) -> list[WindowHooks]:
    if window.tool not in FRAMEWORK_PROFILERS:
        return []
    if problem := profiler_problem(window.tool, framework, device):  # config.problems' rule
        raise UsageError(problem)
    trace_dir = Path(window.trace_dir or ".")
    trace_dir.mkdir(parents=True, exist_ok=True)
    return [_FRAMEWORK_HOOKS[window.tool](trace_dir, window, device)]


def profile_run(config: BenchConfig, runner: StepRunner) -> BatchResult:
    """Run the configured window on ``runner``; the result says which iterations the window held."""
    window = config.profile
    assert window is not None, "profile_run needs a configuration with a profile window"
    print(f"batch {config.batch_size}: {window.tool} profiles iterations {window.start_iteration} to "
          f"{window.stop_iteration - 1}", flush=True)
    model = config.model
    recorder = WindowRecorder()
    markers = markers_for(capabilities_of(model.framework).markers, model.device)
    hooks: list[WindowHooks] = [recorder, CaptureHooks(markers),
                                *framework_hooks(window, model.framework, model.device)]
    timing = profile_window(runner, window, hooks)
    return BatchResult(config.batch_size, Status.OK, None, {
        "profiler": window.tool,
        "profiled_iterations": recorder.iterations,
        # Timed with a profiler attached: how long the window took, never a throughput to compare.
        "profiled_samples_per_sec": samples_per_sec(runner.samples_per_step, len(timing.step_s), timing.window_s),
        "window_s": timing.window_s,
    })
