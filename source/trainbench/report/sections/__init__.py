"""The report's sections, one module each: the numbers in tables, the pictures beside them, or one line saying why
there is nothing to show. They draw ``report.found`` records and read no other command's output.

``SECTIONS`` is the page's order. A new section is one module here with one function
``<name>_section(data: ReportData) -> Section``, given its place in ``SECTIONS``; what several sections share is
``common.py`` (labels, tables, notes) and ``settings.py`` (a measured setting in words)."""

from __future__ import annotations

from collections.abc import Callable

from trainbench.render.page import Section
from trainbench.report.found import ReportData
from trainbench.report.sections.campaigns import campaigns_section
from trainbench.report.sections.comparisons import comparisons_section
from trainbench.report.sections.coreutil import coreutil_section
from trainbench.report.sections.environment import environment_section
from trainbench.report.sections.failures import failures_section
from trainbench.report.sections.framework_profiles import framework_profiles_section
from trainbench.report.sections.headline import headline_section
from trainbench.report.sections.input_bound import input_section
from trainbench.report.sections.invalid import invalid_section
from trainbench.report.sections.models import models_section
from trainbench.report.sections.telemetry import telemetry_section
from trainbench.report.sections.throughput import throughput_section
from trainbench.report.sections.timeline import timeline_section
from trainbench.report.sections.training import training_section
from trainbench.report.sections.variability import variability_section

SECTIONS: tuple[Callable[[ReportData], Section], ...] = (
    headline_section,
    environment_section, throughput_section, failures_section, invalid_section, input_section, campaigns_section,
    telemetry_section,
    coreutil_section, timeline_section, framework_profiles_section, variability_section, comparisons_section,
    models_section, training_section)
