"""Campaigns: a YAML matrix of benchmark settings (``matrix``), planned into interleaved, repeated runs that
``runner`` runs into one folder each, ``table`` gathers into results.csv and its summary, and ``slurm`` turns into
an sbatch job array."""

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
