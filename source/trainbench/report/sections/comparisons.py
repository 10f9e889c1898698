"""The Comparisons section: the measured settings that differ in one setting, B against A, with the change, its
interval and a verdict (``report/ranking.py``'s pairs)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from trainbench.render.console import workload_title
from trainbench.render.page import Section, cell_text, heading, paragraph, table
from trainbench.report.found import ReportData
from trainbench.report.ranking import MAX_PAIRS, MAX_UNCOMPARED, Compared, Pairs, pairs, setting_names, varying
from trainbench.report.sections.settings import described, rows_of, setting_cell, title_of, unit_header
from trainbench.results.significance import CONFIDENCE


def change_text(compared: Compared) -> str:
    """"+12.3 % (+10.1 to +14.6)"; the change alone without a test."""
    verdict = compared.verdict
    if verdict.low_pct is None or verdict.high_pct is None:
        return f"{verdict.change_pct:+.1f} %"
    return f"{verdict.change_pct:+.1f} % ({verdict.low_pct:+.1f} to {verdict.high_pct:+.1f})"


def _verdict_word(compared: Compared) -> str:
    if compared.verdict.significant is None:
        return "no verdict"
    if not compared.verdict.significant:
        return "no clear difference"
    return "B faster" if compared.verdict.change_pct > 0 else "B slower"


def _flags(compared: Compared) -> str:
    return "; ".join(f"{side}: {flag}" for side, row in (("A", compared.a), ("B", compared.b))
                     for flag in row["flags"])


def pairs_table(found: list[Compared], names: Sequence[str], frame: pd.DataFrame) -> str:
    setting = found[0].setting
    context = [name for name in names if name != setting]
    several = frame["workload"].nunique() > 1
    unit = unit_header(frame)
    header = [f"{title_of(setting)}: A -> B", "where", f"A {unit}", f"B {unit}",
              f"change ({CONFIDENCE * 100:g} % interval)", "verdict", "why", "flags", "A", "B"]
    rows = []
    for each in found:
        where = described(each.a, context)
        if several:
            where = f"{workload_title(each.a['workload'], each.a.get('size'))}: {where}"
        change = " -> ".join(cell_text(setting_cell(setting, row[setting])) for row in (each.a, each.b))
        rows.append([change, where,
                     each.a["samples_per_sec"], each.b["samples_per_sec"], change_text(each), _verdict_word(each),
                     each.verdict.text, _flags(each), each.a["source"], each.b["source"]])
    return table(header, rows, [not each.comparable or each.verdict.significant is None for each in found])


def _uncompared_part(found: Pairs) -> str:
    if not found.uncompared:
        return ""
    total = sum(item.pairs for item in found.uncompared)
    shown = found.uncompared[:MAX_UNCOMPARED]
    rows = [[len(item.settings), ", ".join(title_of(name) for name in item.settings), item.pairs,
             f"{item.example[0]} and {item.example[1]}"] for item in shown]
    parts = [heading(f"Not compared: {total} pair{'s' if total > 1 else ''} that differ in several settings"),
             paragraph("A change between rows that differ in several settings mixes their effects: these pairs are "
                       "not compared. Counted by the settings they differ in.", "note"),
             table(["settings that differ", "which", "pairs", "for example"], rows)]
    if len(found.uncompared) > len(shown):
        left = found.uncompared[len(shown):]
        parts.append(paragraph(f"{len(left)} more combinations of differing settings ({sum(i.pairs for i in left)} "
                               "pairs) not listed.", "note"))
    return "".join(parts)


def comparisons_section(data: ReportData) -> Section:
    title = "Comparisons: settings that differ in one setting"
    frame = rows_of(data)
    if len(frame) < 2:
        return Section("comparisons", title, None, "Fewer than two measured settings (ok batch sizes of runs or "
                       "campaign configurations): nothing to compare.")
    names = setting_names(frame)
    found = pairs(frame)
    shown = varying(frame, names)
    parts = [paragraph(
        f"Each pair of measured settings of one workload that differ in exactly one setting (batch sizes: "
        f"neighbours only), B against A (B: the later row found; for batch size the larger). change: B's samples/s "
        f"over A's, with its {CONFIDENCE * 100:g} % interval; verdict: Welch's t-test on the samples (a run's "
        "timed windows' own samples/s, a campaign's repetitions' samples/s), at least 2 a side (3 or more for a "
        "useful interval), p < 0.05. A run's windows and a campaign's repetitions are not comparable samples: such "
        "a pair gets the change only. Shaded: no verdict.", "note")]
    for setting, compared in found.compared.items():
        left = found.left_out.get(setting, 0)
        parts += [heading(f"{title_of(setting)} ({len(compared) + left} "
                          f"pair{'s' if len(compared) + left > 1 else ''})"),
                  pairs_table(compared, [name for name in names if name in shown or name == "batch_size"], frame)]
        if left:
            parts.append(paragraph(f"The first {MAX_PAIRS} of {MAX_PAIRS + left} pairs are shown; the other {left} "
                                   "are left out.", "note"))
    if not found.compared:
        parts.append(paragraph("No two measured settings of one workload differ in exactly one setting.", "absent"))
    parts.append(_uncompared_part(found))
    if found.same:
        parts.append(paragraph(f"{found.same} pair{'s' if found.same > 1 else ''} of rows measure the same settings "
                               "(in different runs): not compared here; trainbench compare A B compares two runs.",
                               "note"))
    return Section("comparisons", title, "".join(parts))
