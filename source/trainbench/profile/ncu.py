"""Nsight Compute: the pipe utilization metrics of every kernel launched inside the window.

ncu replays each kernel once per metric pass, so the window should be a few iterations. Only the window is
profiled (``--profile-from-start off``: the worker calls cudaProfilerStart/Stop); the CSV goes to a log file
(``--log-file``) so nothing has to be cut out of the program's own output.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainbench.analysis.coreutil import CORES, analyze_file
from trainbench.errors import UsageError
from trainbench.profile.gpu_target import GpuTarget
from trainbench.profile.tools import counter_permission_failure, find_binary
from trainbench.results.csv_cells import neutral_frame
from trainbench.results.layout import batch_file

if TYPE_CHECKING:
    import pandas as pd

SUFFIX = ".avg.pct_of_peak_sustained_elapsed"  # share of all elapsed cycles, as the original suite reported
WEIGHTS = ("gpc__cycles_elapsed.max", "gpu__time_duration.sum")  # coreutil's weight; the duration for reading
# Volta, Turing and A100 have an FP16 pipe of their own; from 8.6 on FP16 runs on the FMA pipes.
FP16_PIPE_CCS = {(7, 0), (7, 2), (7, 5), (8, 0)}
KERNELS_SUFFIX = ".kernels.csv"  # batch_<X>.kernels.csv: coreutil's per-kernel table of that batch size


def pipe_bases(cc: tuple[int, int]) -> list[str]:
    """Metric bases for the FMA, FP16, Tensor and SFU pipes on a GPU of compute capability ``cc``
    (../shared/docs/PROFILER_FACTS.md; confirmed on an H100 in benchmarks/results/h100_torch)."""
    fp16 = "sm__inst_executed_pipe_fp16" if cc in FP16_PIPE_CCS else "sm__inst_executed_pipe_fma_type_fp16"
    if cc[0] >= 10:
        tensor = ["sm__pipe_tensor_subpipe_hmma_cycles_active", "sm__inst_executed_pipe_tensor_subpipe_hmma"]
    elif cc == (8, 9):
        tensor = ["sm__pipe_tensor_cycles_active_v2", "sm__inst_executed_pipe_tensor_op_hmma"]
    else:
        tensor = ["sm__pipe_tensor_cycles_active", "sm__inst_executed_pipe_tensor_op_hmma"]
    if cc == (9, 0):
        tensor.append("sm__inst_executed_pipe_tensor_op_gmma")  # Hopper's warp-group MMA (instructions only)
    if cc < (8, 6):
        tensor.append("sm__inst_executed_pipe_tensor")  # the original suite's metric, gone from newer chips
    return ["sm__inst_executed_pipe_fma", "sm__pipe_fma_cycles_active", fp16, *tensor, "sm__inst_executed_pipe_xu"]


def metric_set(cc: tuple[int, int]) -> list[str]:
    return [*WEIGHTS, *(base + SUFFIX for base in pipe_bases(cc))]


def known_bases(query_output: str) -> set[str]:
    """Metric bases listed by ``ncu --query-metrics`` (first column of each table row)."""
    return {line.split()[0] for line in query_output.splitlines() if line[:1].isalpha() and "__" in line.split()[0]}


def filter_by_query(metrics: list[str], known: set[str]) -> tuple[list[str], list[str]]:
    """(kept, dropped): a metric whose base this GPU's ncu does not list would fail the whole run."""
    # The weights exist on every GPU ncu supports; some ncu versions leave them out of the listing.
    kept = [m for m in metrics if m in WEIGHTS or m.split(".")[0] in known]
    return kept, [m for m in metrics if m not in kept]


def read_kernel_table(run_dir: Path, batch_size: int) -> pd.DataFrame | None:
    """A batch size's per-kernel table as ``Ncu.analyze`` wrote it (kernel, launches, weight_share, the four
    units; largest weight share first); None when absent or unreadable."""
    import pandas as pd

    try:
        return pd.read_csv(batch_file(run_dir, batch_size, KERNELS_SUFFIX))
    except (OSError, ValueError, pd.errors.ParserError):
        return None


class Ncu:
    name = "ncu"
    summary_fields = ("kernels", *CORES, *(f"{core}_metric" for core in CORES))
    plot_fields = tuple((core, core) for core in CORES)
    plot_ylabel = "utilization, % of peak (weighted by cycles)"

    def __init__(self, metrics: list[str] | None = None, clock_control: str = "base") -> None:
        self.override = metrics  # --metrics: used as given
        self.metrics: list[str] = []
        self.binary = ""
        # ncu's default, "base", locks the clocks to base while it profiles (and restores them): percentages of
        # peak are then comparable between runs; "none" profiles at the clocks the card chooses itself.
        self.clock_control = clock_control

    def prepare(self, gpu: GpuTarget | None, log_dir: Path) -> None:
        self.binary = find_binary("ncu", "Nsight Compute: in the trainbench image at /usr/local/cuda/bin/ncu")
        assert gpu is not None
        if gpu.compute_capability < (7, 0):
            raise UsageError(f"ncu does not profile compute capability {gpu.cc} ({gpu.name}): use nvprof")
        if self.override:
            self.metrics = self.override
            return
        self.metrics = metric_set(gpu.compute_capability)
        query = subprocess.run([self.binary, "--query-metrics"], capture_output=True, text=True, check=False,
                               timeout=300)
        (log_dir / "ncu_query_metrics.txt").write_text(query.stdout + query.stderr)
        known = known_bases(query.stdout)
        if query.returncode == 0 and known:
            self.metrics, dropped = filter_by_query(self.metrics, known)
            if dropped:
                print(f"ncu: {gpu.name} lacks {', '.join(dropped)}; profiling without", flush=True)

    def command(self, run_dir: Path, batch_size: int) -> list[str]:
        return [self.binary, "--profile-from-start", "off", "--target-processes", "all", "--csv",
                "--print-units", "base", "--clock-control", self.clock_control, "--metrics", ",".join(self.metrics),
                "--log-file", str(batch_file(run_dir, batch_size, ".csv"))]

    def analyze(self, run_dir: Path, batch_size: int) -> dict[str, Any]:
        result = analyze_file(batch_file(run_dir, batch_size, ".csv"))
        # Which kernels the averages come from: the "why" behind each batch size's row.
        neutral_frame(result.per_kernel).to_csv(batch_file(run_dir, batch_size, KERNELS_SUFFIX))
        return {"kernels": result.launches,
                **{core: result.cores[core].value for core in CORES},
                **{f"{core}_metric": result.cores[core].metric for core in CORES}}

    def explain_failure(self, text: str) -> str | None:
        return counter_permission_failure(text)
