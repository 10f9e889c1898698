"""A measured setting in words, for the headline and the comparisons: "batch 32", "on cpu", "no XLA", "matmul
precision high", "shard fsdp", and the settings' column headers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from trainbench.render.console import per_second
from trainbench.report.found import ReportData
from trainbench.report.ranking import SYNTHETIC, measured_rows
from trainbench.results.header import BEFORE_FORMAT_6
from trainbench.results.run_settings import STEP, STEP_SINCE_6
from trainbench.workloads import settings as shape_settings
from trainbench.workloads.settings import SHAPES

# Column headers of the settings (a campaign's own axes: their names). The shape settings are the ranking's own
# (``ranking.SETTINGS``), headed by their declared words; another declared setting (num_classes) reaches a table
# only as a campaign's own axis, by its name.
TITLES = {"framework": "framework", "precision": "precision", "device": "device", "size": "size",
          **{name: shape_settings.named(name).words for name in SHAPES}, "data": "data", "compile": "torch.compile",
          "cuda_graph": "CUDA graph", "xla": "XLA", "channels_last": "channels last",
          "matmul_precision": "matmul precision", "optimizer": "optimizer",
          "activation_checkpointing": "activation checkpointing", "shard": "shard", "gpus": "processes", "gpu": "GPU",
          "batch_size": "batch size"}
# Said of a step setting a file from before format 5 does not record: unknown, not "highest" or the reference.
NOT_RECORDED = "not recorded"


def rows_of(data: ReportData) -> pd.DataFrame:
    return data.measured if data.measured is not None else measured_rows(data)


def _switch(value: Any, name: str) -> str:
    return name if value is True else f"no {name}"


def phrase(name: str, value: Any) -> str:
    """One setting as words: "batch 32", "on cpu", "synthetic data", "no XLA", "matmul precision high", "activation
    checkpointing full", "shard fsdp"; "" when not recorded, except a step setting's: "optimizer not recorded"
    (unknown, where another row may record it); "" too for format 6's step settings at their defaults (no
    recomputation, DDP: what every run before format 6 ran, and every one-process run), which need no saying."""
    if value is None:
        return f"{title_of(name)} {NOT_RECORDED}" if name in STEP else ""
    if name in STEP_SINCE_6 and value == BEFORE_FORMAT_6[name]:
        return ""
    if name in shape_settings.NAMES:  # "64 px", "seq_len 128": as declared
        return shape_settings.named(name).text(value)
    words = {"device": lambda: f"on {value}", "size": lambda: f"{value} size", "batch_size": lambda: f"batch {value}",
             "data": lambda: "synthetic data" if value == SYNTHETIC else f"data {value}",
             "compile": lambda: "no compile" if value is False else f"compile {value}",
             "cuda_graph": lambda: _switch(value, "CUDA graph"), "xla": lambda: _switch(value, "XLA"),
             "channels_last": lambda: _switch(value, "channels last"),
             "gpus": lambda: f"{value} process{'es' if value != 1 else ''}",
             "matmul_precision": lambda: f"matmul precision {value}", "optimizer": lambda: f"optimizer {value}",
             "activation_checkpointing": lambda: f"activation checkpointing {value}",
             "shard": lambda: f"shard {value}",
             "framework": lambda: str(value), "precision": lambda: str(value), "gpu": lambda: str(value)}
    return words.get(name, lambda: f"{name} {value}")()


def described(row: Mapping[str, Any], names: Sequence[str]) -> str:
    return " ".join(part for name in names if (part := phrase(name, row.get(name))))


def title_of(name: str) -> str:
    return TITLES.get(name, name)


def setting_cell(name: str, value: Any) -> Any:
    """A setting's value in a table cell: a step setting not recorded says so, rather than a blank."""
    return NOT_RECORDED if value is None and name in STEP else value


def unit_header(frame: pd.DataFrame) -> str:
    units = {per_second(str(unit)) for unit in frame["sample_unit"]}
    return units.pop() if len(units) == 1 else "samples/s"
