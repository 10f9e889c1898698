"""The built-in legality filter: which combinations of axis values the suite would refuse (``config.problems``, the
rules the command line applies), and the matrix's own exclude rules."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainbench.campaign.matrix.values import AXIS_DEFAULTS, NO_PROFILER, SYNTHETIC
from trainbench.config import LaunchConfig, model_config_from, problems, workload_problems
from trainbench.data.model_data import records_problem
from trainbench.errors import UsageError

MULTI_NODE = "nodes above 1: run multi-node sweeps with scripts/slurm/throughput.sbatch, not in a campaign"


def illegal(values: Mapping[str, Any]) -> str | None:
    """Why the suite would refuse this combination of axis values, or None: config.problems' first answer, asked
    as ``trainbench throughput`` and ``profile`` ask it (on the device as given: 'auto' is judged where it runs)."""
    chosen = {**AXIS_DEFAULTS, **values}
    try:
        model = model_config_from(chosen)  # refuses what the model's own settings cannot do together
    except UsageError as error:
        return str(error)
    profiler = None if chosen["profiler"] == NO_PROFILER else chosen["profiler"]
    data = None if chosen["data"] == SYNTHETIC else chosen["data"]
    found = problems(model, launch=LaunchConfig(processes_per_node=chosen["gpus"]), profiler=profiler,
                     loader=chosen["loader"], data=data)
    if found and found[0] in workload_problems(model, data):  # the command line's order: these first,
        return found[0]
    if data is not None and (problem := records_problem(model, data)):  # then the data folder's records,
        return problem
    if found:  # then the run's other settings
        return found[0]
    return MULTI_NODE if chosen["nodes"] > 1 else None


def excluded(values: Mapping[str, Any], rules: Sequence[Mapping[str, tuple[Any, ...]]]) -> bool:
    """Whether one rule matches every one of its keys."""
    return any(all(values[key] in allowed for key, allowed in rule.items()) for rule in rules)
