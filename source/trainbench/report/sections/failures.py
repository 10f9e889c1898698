"""The Failed batch sizes section: every batch size of a run, profile, campaign, variability study or training
run that did not run to the end, with its reason."""

from __future__ import annotations

from typing import Any

from trainbench.render.page import Section, table
from trainbench.report.found import ReportData
from trainbench.report.sections.common import absent, campaign_rows, titled
from trainbench.results.records import Status


def _failed(row: dict[str, Any]) -> bool:
    """A batch size that did not run to the end (oom, error, interrupted, diverged: a loss that was not finite); an
    invalid one ran, and its file holds no measurement."""
    return row.get("status") not in (Status.OK, Status.INVALID)


def failures_section(data: ReportData) -> Section:
    title = "Failed batch sizes"
    rows = [(titled(run), row.get("batch_size"), row.get("status"), row.get("error"))
            for run in [*data.runs, *(profile.run for profile in data.profiles)]
            for row in run.rows if _failed(row)]
    rows += [(f"campaign {campaign.path.name}: {row.get('run_folder')}", row.get("batch_size"), row.get("status"),
              row.get("error")) for campaign in data.campaigns for row in campaign_rows(campaign) if _failed(row)]
    rows += [(f"variability {study.path.name}: {row['run']}", row["batch_size"], row["status"], row["error"])
             for study in data.variability for row in study.runs.to_dict("records") if _failed(row)]
    rows += [(f"training {training.path.name}", failure.get("batch_size"), failure.get("status"),
              f"{failure.get('error')} (after {failure.get('epochs_finished')} epochs)")
             for training in data.trainings for failure in training.failures]
    if not rows:
        return absent("failures", title, "Every batch size measured ran to the end (no oom, error, interruption or "
                      "divergence).")
    return Section("failures", title, table(["where", "batch_size", "status", "reason"], rows, [True] * len(rows)))
