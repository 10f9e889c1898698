"""The GPU timeline section: Nsight Systems and nvprof profiles, how busy the GPU was, its time per step and the
top kernels."""

from __future__ import annotations

import pandas as pd

from trainbench.render.page import Section, heading, image, paragraph, table
from trainbench.report.found import Profile, ReportData
from trainbench.report.sections.common import absent, kernel_tables, left_out_note, profiles_of, rows_table, titled

_TIMELINE = ("batch_size", "status", "gpu_busy_fraction", "window_ms", "steps", "step_gpu_ms_median", "memcpy_ms",
             "kernels", "top_kernel", "profiled_iterations")
_TIMELINE_TOOLS = ("nsys", "nvprof")


def _nsys_kernels(kernels: pd.DataFrame) -> pd.DataFrame:
    """nsys' top kernels in readable units: total ms, mean µs, share of the kernel time (a value absent from the
    file: blank)."""
    kernels = kernels.reindex(columns=["name", "total_ns", "instances", "mean_ns", "share"])
    number = {name: pd.to_numeric(kernels[name], errors="coerce") for name in ("total_ns", "mean_ns")}
    return pd.DataFrame({"name": kernels["name"], "total_ms": number["total_ns"] / 1e6,
                         "instances": kernels["instances"], "mean_us": number["mean_ns"] / 1e3,
                         "share": kernels["share"]})


def _step_table(profile: Profile) -> str:
    rows = [(batch, len(steps), min(steps), pd.Series(steps).median(), max(steps), steps)
            for batch, steps in sorted(profile.step_gpu_ms.items()) if steps]
    if not rows:
        return ""
    return heading("GPU time per profiled step (ms, kernels merged across streams)") + table(
        ["batch size", "steps", "min (ms)", "median (ms)", "max (ms)", "each step (ms)"], rows)


def timeline_section(data: ReportData) -> Section:
    title = "GPU timeline (Nsight Systems, nvprof)"
    profiles = profiles_of(data, _TIMELINE_TOOLS)
    if not profiles:
        return absent("timeline", title, "No nsys or nvprof profile (profiled_data_nsys/profile.json) in the folders "
                      "given.")
    parts = [paragraph("gpu_busy_fraction: the share of the profiled window in which some kernel ran (kernels of "
                       "concurrent streams merged, not summed).", "note")]
    for profile in profiles:
        run = profile.run
        parts += [heading(titled(run)), rows_table(_TIMELINE, run.rows, ("batch_size", "status")), _step_table(profile),
                  left_out_note(profile.left_out, "list{s}", "the step and kernel tables")]
        parts += [image(picture) for picture in run.pictures]
        parts.append(kernel_tables(profile, _nsys_kernels))
    return Section("timeline", title, "".join(parts))
