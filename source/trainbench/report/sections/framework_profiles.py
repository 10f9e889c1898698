"""The Framework profiler traces section: the torch and tf profiler runs and where their traces are."""

from __future__ import annotations

from trainbench.config import FRAMEWORK_PROFILERS
from trainbench.render.page import Section, heading, paragraph
from trainbench.report.found import ReportData
from trainbench.report.sections.common import absent, profiles_of, rows_table, titled

_FRAMEWORK = ("batch_size", "status", "profiled_iterations", "profiled_samples_per_sec", "trace", "top_operator")
_FRAMEWORK_TOOLS = FRAMEWORK_PROFILERS


def framework_profiles_section(data: ReportData) -> Section:
    title = "Framework profiler traces"
    profiles = profiles_of(data, _FRAMEWORK_TOOLS)
    if not profiles:
        return absent("framework-profiles", title, "No torch or tf profiler run (profiled_data_torch, "
                      "profiled_data_tf) in the folders given.")
    parts = [paragraph("Traces to open in TensorBoard or Perfetto, relative to each profile's folder.", "note")]
    for profile in profiles:
        parts += [heading(titled(profile.run)), rows_table(_FRAMEWORK, profile.run.rows, ("batch_size", "status"))]
    return Section("framework-profiles", title, "".join(parts))
