"""Analysis of what was measured and profiled: ncu and nvprof CSV readers and the core-utilization computation
(``coreutil``), nsys and nvprof timelines, the measurements that performance models fit (``measurements``,
``perf_models``, ``extrap``) and the variability across GPUs and runs."""

from trainbench.analysis.coreutil import (
    CORES,
    CoreUtilization,
    CoreValue,
    analyze_file,
    analyze_profile,
    choose_weight,
    map_cores,
    per_kernel_table,
    summary_frame,
    weighted_means,
)
from trainbench.analysis.ncu_csv import read_ncu_csv
from trainbench.analysis.nvprof_csv import read_nvprof_csv
from trainbench.analysis.profiles import read_profile

__all__ = [
    "CORES",
    "CoreUtilization",
    "CoreValue",
    "analyze_file",
    "analyze_profile",
    "choose_weight",
    "map_cores",
    "per_kernel_table",
    "read_ncu_csv",
    "read_nvprof_csv",
    "read_profile",
    "summary_frame",
    "weighted_means",
]
