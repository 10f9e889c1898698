"""One entry point for every supported profiler CSV: find the table, pick the reader by its header."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from trainbench.analysis.csv_table import NCU_DETAILS, NCU_RAW, NVPROF_METRICS, locate_table
from trainbench.analysis.ncu_csv import MetricFilter, read_details, read_raw
from trainbench.analysis.nvprof_csv import read_metrics

_READERS = {NCU_DETAILS: read_details, NCU_RAW: read_raw, NVPROF_METRICS: read_metrics}


def read_profile(path: str | Path, keep: MetricFilter | None = None) -> pd.DataFrame:
    """ncu details, ncu raw or nvprof metrics, as the tidy table of that reader (``attrs["layout"]`` says which).

    Raises UsageError (one line, without the file name) for anything that is not such a table.
    """
    table = locate_table(path)
    return _READERS[table.kind](table, keep)
