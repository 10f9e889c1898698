"""The Core utilization section: Nsight Compute profiles, each batch size's use of the GPU's cores and its top
kernels."""

from __future__ import annotations

from trainbench.render.page import Section, heading, image, paragraph
from trainbench.report.found import ReportData, RunRecord
from trainbench.report.sections.common import absent, kernel_tables, profiles_of, rows_table, titled

_COREUTIL = ("batch_size", "status", "kernels", "fma", "fp16", "tensor", "sfu", "profiled_iterations")
_COREUTIL_TOOLS = ("ncu",)


def _metrics_note(run: RunRecord) -> str:
    first = next((row for row in run.rows if row.get("fma_metric")), None)
    metrics = "; ".join(f"{core}: {first[f'{core}_metric']}" for core in ("fma", "fp16", "tensor", "sfu")
                        if first and first.get(f"{core}_metric"))
    clocks = run.header.get("clock_control")
    text = ("% of peak sustained, averaged over the window's kernels weighted by their cycles"
            + (f"; clock control {clocks}" if clocks else "") + (f". Metrics: {metrics}" if metrics else ""))
    return paragraph(text, "note")


def coreutil_section(data: ReportData) -> Section:
    title = "Core utilization (Nsight Compute)"
    profiles = profiles_of(data, _COREUTIL_TOOLS)
    if not profiles:
        return absent("coreutil", title, "No ncu profile (profiled_data_ncu/profile.json) in the folders given.")
    parts = []
    for profile in profiles:
        run = profile.run
        parts += [heading(titled(run)), _metrics_note(run), rows_table(_COREUTIL, run.rows, ("batch_size", "status"))]
        parts += [image(picture) for picture in run.pictures]
        parts.append(kernel_tables(profile))  # coreutil's per-kernel table as written
    return Section("coreutil", title, "".join(parts))
