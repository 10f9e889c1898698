"""The worker's side of a profiled run: the hooks a profiler needs, the window run, and its record."""

from __future__ import annotations

from pathlib import Path

from trainbench.bench.stats import samples_per_sec
from trainbench.config import BenchConfig, ProfileConfig
from trainbench.engines.base import StepRunner
from trainbench.profile.markers import markers_for
from trainbench.profile.window import CaptureHooks, WindowHooks, WindowRecorder, profile_window
from trainbench.results.records import BatchResult, Status


def framework_hooks(window: ProfileConfig, framework: str, device: str) -> list[WindowHooks]:
    if window.tool not in ("torch", "tf"):
        return []
    if window.tool != framework:
        raise ValueError(f"the {window.tool} profiler cannot profile the {framework} engine")
    trace_dir = Path(window.trace_dir or ".")
    trace_dir.mkdir(parents=True, exist_ok=True)
    if framework == "torch":
        from trainbench.profile.framework import TorchProfilerHooks

        return [TorchProfilerHooks(trace_dir, window, cuda=device == "cuda")]
    from trainbench.profile.framework import TfProfilerHooks

    return [TfProfilerHooks(trace_dir)]


def profile_run(config: BenchConfig, runner: StepRunner) -> BatchResult:
    """Run the configured window on ``runner``; the result says which iterations the window held."""
    window = config.profile
    assert window is not None, "profile_run needs a configuration with a profile window"
    print(f"batch {config.batch_size}: {window.tool} profiles iterations {window.start_iteration} to "
          f"{window.stop_iteration - 1}", flush=True)
    model = config.model
    recorder = WindowRecorder()
    hooks = [recorder, CaptureHooks(markers_for(model.framework, model.device)),
             *framework_hooks(window, model.framework, model.device)]
    timing = profile_window(runner, window, hooks)
    return BatchResult(config.batch_size, Status.OK, None, {
        "profiler": window.tool,
        "profiled_iterations": recorder.iterations,
        # Timed with a profiler attached: how long the window took, never a throughput to compare.
        "profiled_samples_per_sec": samples_per_sec(runner.images_per_step, len(timing.step_s), timing.window_s),
        "window_s": timing.window_s,
    })
