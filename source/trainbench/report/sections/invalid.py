"""The Invalid values section: every value read that is no measurement, where it was found and why (the
preamble and the terminal count them too)."""

from __future__ import annotations

from trainbench.render.page import Section, paragraph, table
from trainbench.report.found import ReportData
from trainbench.report.sections.common import absent, campaign_rows, is_invalid, titled


def invalid_items(data: ReportData) -> list[tuple[str, str, str]]:
    """Every value left out as no measurement: (where, what, why: its file and field)."""
    items = []
    for run in [*data.runs, *(profile.run for profile in data.profiles)]:
        items += [(titled(run), f"batch {row.get('batch_size')}", str(row.get("error"))) for row in run.invalid_rows()]
        items += [(titled(run), "telemetry", why) for why in run.left_out]
    items += [(titled(profile.run), "profiler's details", why) for profile in data.profiles for why in profile.left_out]
    items += [(f"campaign {campaign.path.name}: {row.get('run_folder')}", f"batch {row.get('batch_size')}",
               str(row.get("error"))) for campaign in data.campaigns for row in campaign_rows(campaign)
              if is_invalid(row)]
    items += [(f"variability {study.path.name}: {row['run']}", f"batch {row['batch_size']}", str(row["error"]))
              for study in data.variability for row in study.runs.to_dict("records") if is_invalid(row)]
    items += [(f"model {found.path.name}", f"models[{index}]", why) for found in data.models
              for index, why in sorted(found.invalid.items())]
    for training in data.trainings:
        items += [(f"training {training.path.name}", f"epoch {training.epochs[index].get('epoch')}", why)
                  for index, why in sorted(training.invalid.items())]
        items += [(f"training {training.path.name}", "a line", why) for why in training.left_out]
    return items


def invalid_section(data: ReportData) -> Section:
    title = "Invalid values"
    items = invalid_items(data)
    if not items:
        return absent("invalid", title, "Every rate, time and curve value read is a number that a run can measure.")
    note = paragraph("Values that no run measures (NaN, infinite, negative, a text where a number belongs): each is "
                     "shown where it was found, marked, and left out of every figure, comparison and statistic.",
                     "note")
    return Section("invalid", title, note + table(["where", "what", "reason"], items, [True] * len(items)))
