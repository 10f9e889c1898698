"""The GPU telemetry section: energy, power and clocks over the timed windows of runs and campaigns, and each
run's telemetry timeline."""

from __future__ import annotations

from trainbench.render.page import Section, figure_image, heading, paragraph
from trainbench.render.telemetry_plot import telemetry_figure
from trainbench.report.found import Campaign, ReportData, RunRecord
from trainbench.report.sections.common import absent, campaign_rows, left_out_note, rows_table, run_label, titled
from trainbench.telemetry.schema import TELEMETRY_DIR, telemetry_values


def _run_telemetry(run: RunRecord) -> str:
    measured = [row for row in run.rows if row.get("energy_j") is not None or row.get("telemetry_samples")]
    picture = figure_image(lambda: telemetry_figure(run.path / TELEMETRY_DIR, f"GPU telemetry: {run_label(run)}"),
                           "SM clock, power and temperature against time")
    if not measured and not picture and not run.left_out:
        return ""
    parts = [heading(titled(run))]
    if measured:
        parts.append(rows_table(("batch_size", *telemetry_values()), measured))
    parts.append(picture)
    parts.append(left_out_note(run.left_out, "column{s} with values that are no reading", "the figure"))
    return "".join(parts)


def _campaign_telemetry(campaign: Campaign) -> str:
    rows = [row for row in campaign_rows(campaign) if row.get("energy_j") is not None]
    if not rows:
        return ""
    columns = ["run_folder", "config", "batch_size",
               *(name for name in telemetry_values() if name != "telemetry_note")]
    return heading(f"campaign {campaign.path.name}") + rows_table(columns, rows, ("run_folder", "batch_size"))


def telemetry_section(data: ReportData) -> Section:
    title = "GPU telemetry"
    parts = [part for part in [*map(_run_telemetry, data.runs), *map(_campaign_telemetry, data.campaigns)] if part]
    if not parts:
        notes = {note for run in data.runs for row in run.rows if (note := row.get("telemetry_note"))}
        why = f" Recorded: {'; '.join(sorted(notes))}." if notes else ""
        return absent("telemetry", title, "No GPU telemetry in the runs found: energy, power and clocks are read "
                      f"from NVML during runs on a GPU.{why}")
    note = paragraph("Over the timed windows: energy from NVML's energy counter, joules per sample, mean power, the "
                     "SM clock's median and the share of time held down by the power cap or heat; the figure shows "
                     "the whole run with the timed windows shaded.", "note")
    return Section("telemetry", title, note + "".join(parts))
