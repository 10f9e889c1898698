"""The Input-bound verdicts section: the training rate against the input pipeline's rate alone, for runs on real
data."""

from __future__ import annotations

from trainbench.render.page import Section, paragraph, table
from trainbench.report.found import ReportData
from trainbench.report.sections.common import absent, campaign_rows, is_invalid, titled


def input_section(data: ReportData) -> Section:
    title = "Input-bound verdicts"
    rows = [(titled(run), row["batch_size"], row.get("samples_per_sec"), row.get("input_samples_per_sec"),
             row.get("input_bound")) for run in data.runs for row in run.rows
            if row.get("input_samples_per_sec") is not None and not is_invalid(row)]
    rows += [(f"campaign {campaign.path.name}: {row.get('run_folder')}", row.get("batch_size"),
              row.get("samples_per_sec"), row.get("input_samples_per_sec"), row.get("input_bound"))
             for campaign in data.campaigns for row in campaign_rows(campaign)
             if row.get("input_samples_per_sec") is not None and not is_invalid(row)]
    if not rows:
        return absent("input", title, "No run on real data (--data): the input pipeline was not measured alone, so "
                      "there is nothing to judge.")
    note = paragraph("input_bound: the input pipeline alone (same batch size, no model) delivers less than 1.1 x the "
                     "training rate measured with it: the run measured the pipeline at least as much as the step.",
                     "note")
    return Section("input", title, note + table(
        ["run", "batch_size", "training images/s", "pipeline alone images/s", "input_bound"], rows))
