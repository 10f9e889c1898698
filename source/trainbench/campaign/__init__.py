"""Campaigns (issue 12): a YAML matrix of benchmark settings, planned into interleaved, repeated runs."""

from trainbench.campaign.matrix import (
    AXES,
    SETTINGS,
    Experiment,
    Matrix,
    Override,
    Settings,
    bench_configs,
    config_string,
    experiments,
    format_plan,
    load_matrix,
    parse_overrides,
    planned_runs,
)

__all__ = [
    "AXES",
    "SETTINGS",
    "Experiment",
    "Matrix",
    "Override",
    "Settings",
    "bench_configs",
    "config_string",
    "experiments",
    "format_plan",
    "load_matrix",
    "parse_overrides",
    "planned_runs",
]
