"""Each experiment's configurations: one BenchConfig per batch size, as ``trainbench throughput`` (or ``profile``,
with a profiler) builds them, the model through config.model_config_from as the command line's."""

from __future__ import annotations

from typing import Any

from trainbench.campaign.matrix.plan import Experiment, Matrix
from trainbench.campaign.matrix.values import AXIS_DEFAULTS, NO_PROFILER, SYNTHETIC
from trainbench.config import (
    BenchConfig,
    LaunchConfig,
    ModelConfig,
    OptimizerConfig,
    ProfileConfig,
    model_config_from,
)
from trainbench.data.model_data import with_data


def _model(experiment: Experiment) -> ModelConfig:
    """As the throughput command's model, without resolving the device: the runner does, where it runs."""
    values = {axis: experiment.value(axis) for axis in AXIS_DEFAULTS}
    data = values["data"]
    model = model_config_from(values)
    return model if data == SYNTHETIC else with_data(model, data)  # as --data: the data's classes, lengths, kind


def bench_configs(matrix: Matrix, experiment: Experiment) -> list[BenchConfig]:
    """One BenchConfig per batch size, as ``trainbench throughput`` (or ``profile``, with a profiler) builds them."""
    settings, value = matrix.settings, experiment.value
    data = None if value("data") == SYNTHETIC else value("data")
    timing: dict[str, Any] = {"warmup_steps": settings.warmup, "steps": settings.steps, "windows": settings.windows,
                              "sync_every_step": settings.sync_every_step, "profile": None}
    if value("profiler") != NO_PROFILER:
        window = ProfileConfig(tool=value("profiler"), start_iteration=settings.start_iteration,
                               iterations=settings.iterations)
        # the window replaces the timed steps: the placeholders `trainbench profile` uses
        timing = {"warmup_steps": 0, "steps": 1, "windows": 1, "sync_every_step": False, "profile": window}
    model = _model(experiment)
    launch = LaunchConfig(processes_per_node=value("gpus"), nodes=value("nodes"))  # torchrun for gpus > 1
    optimizer = OptimizerConfig.reference(model.workload, value("optimizer"))  # None: the workload's reference
    return [BenchConfig(model=model, batch_size=size, optimizer=optimizer, data=data, loader=value("loader"),
                        launch=launch, **timing) for size in matrix.batch_sizes]
