"""The Variability across GPUs section: each GPU's median against the median GPU, and the spread per batch size."""

from __future__ import annotations

from trainbench.render.page import Section, heading, paragraph
from trainbench.report.found import ReportData
from trainbench.report.sections.common import absent, is_invalid, left_out_note, words_table


def variability_section(data: ReportData) -> Section:
    title = "Variability across GPUs"
    if not data.variability:
        return absent("variability", title, "No variability folder (variability.json) in the folders given.")
    parts = []
    for study in data.variability:
        parts += [heading(f"{study.path.name}: each GPU's median over its repetitions"),
                  paragraph(f"vs_median_pct: against the median GPU at that batch size; outlier: slower than it by "
                            f"more than {study.threshold * 100:g} %.", "note"),
                  words_table(study.gpus, list(study.gpus["outlier"].astype(bool))),
                  left_out_note([f"{row['run']} batch {row['batch_size']}: {row['error']}"
                                 for row in study.runs.to_dict("records") if is_invalid(row)],
                                "invalid result{s}", "the medians, the comparison with the median GPU and the spread"),
                  heading("spread per batch size (over the GPUs' medians, and over every repetition)"),
                  words_table(study.across)]
    return Section("variability", title, "".join(parts))
