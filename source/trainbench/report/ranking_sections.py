"""The report's first section (the best setting per workload and device, and the ranking of every measured
setting) and its comparisons (the pairs that differ in one setting), drawn from ``report/ranking.py``'s rows."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from trainbench.report.console import per_second, workload_title
from trainbench.report.found import ReportData
from trainbench.report.page import Section, cell_text, heading, paragraph, table
from trainbench.report.ranking import (
    MAX_PAIRS,
    MAX_UNCOMPARED,
    SPACE,
    SYNTHETIC,
    Compared,
    Headline,
    Pairs,
    headlines,
    measured_rows,
    pairs,
    ranking,
    setting_names,
    varying,
)
from trainbench.results.significance import CONFIDENCE

# Column headers of the settings (a campaign's own axes: their names)
TITLES = {"framework": "framework", "precision": "precision", "device": "device", "size": "size",
          "image_size": "image size", "seq_len": "sequence length", "data": "data", "compile": "torch.compile",
          "cuda_graph": "CUDA graph", "xla": "XLA", "channels_last": "channels last", "gpus": "processes",
          "gpu": "GPU", "batch_size": "batch size"}
NAMED = ("framework", "precision", "batch_size")  # always in a headline's description of a setting


def rows_of(data: ReportData) -> pd.DataFrame:
    return data.measured if data.measured is not None else measured_rows(data)


# --- words for settings ---------------------------------------------------------------------------------------


def _switch(value: Any, name: str) -> str:
    return name if value is True else f"no {name}"


def phrase(name: str, value: Any) -> str:
    """One setting as words: "batch 32", "on cpu", "synthetic data", "no XLA"; "" when not recorded."""
    if value is None:
        return ""
    words = {"device": lambda: f"on {value}", "size": lambda: f"{value} size", "image_size": lambda: f"{value} px",
             "seq_len": lambda: f"seq_len {value}", "batch_size": lambda: f"batch {value}",
             "data": lambda: "synthetic data" if value == SYNTHETIC else f"data {value}",
             "compile": lambda: "no compile" if value is False else f"compile {value}",
             "cuda_graph": lambda: _switch(value, "CUDA graph"), "xla": lambda: _switch(value, "XLA"),
             "channels_last": lambda: _switch(value, "channels last"),
             "gpus": lambda: f"{value} process{'es' if value != 1 else ''}",
             "framework": lambda: str(value), "precision": lambda: str(value), "gpu": lambda: str(value)}
    return words.get(name, lambda: f"{name} {value}")()


def described(row: Mapping[str, Any], names: Sequence[str]) -> str:
    return " ".join(part for name in names if (part := phrase(name, row.get(name))))


def _title(name: str) -> str:
    return TITLES.get(name, name)


def _spread(row: Mapping[str, Any]) -> str:
    """"spread 3.1 % over 3 windows", or "1 window, no spread"."""
    sample = str(row["sample"])
    if row["n"] < 2 or row["spread_pct"] is None:
        return f"{row['n']} {sample.removesuffix('s') if row['n'] == 1 else sample}, no spread"
    return f"spread {row['spread_pct']:.1f} % over {row['n']} {sample}"


def _rate(value: float) -> str:
    return cell_text(float(value))


# --- the headline and the ranking ------------------------------------------------------------------------------


def _headline_title(line: Headline) -> str:
    """"tiny BERT-base at seq_len 32 on cpu": the network by its size, the sample's shape, the device."""
    shape = " ".join(part for name in ("image_size", "seq_len") if (part := phrase(name, line.best.get(name))))
    return (f"{workload_title(line.workload, line.best.get('size'))}{f' at {shape}' if shape else ''} on "
            f"{line.device or 'an unrecorded device'}")


def _headline_text(line: Headline, names: Sequence[str]) -> str:
    best = line.best
    text = (f"{_headline_title(line)}: best {_rate(best['samples_per_sec'])} {line.unit} ({_spread(best)}) with "
            f"{described(best, names)}")
    if line.slowest is None:
        return text + " (the only setting measured)"
    ratio = best["samples_per_sec"] / line.slowest["samples_per_sec"] if line.slowest["samples_per_sec"] else None
    times = f"{ratio:.3g} x" if ratio is not None else "faster than"
    return (text + f" — {times} the slowest of its {line.rows} settings ({described(line.slowest, names)}, "
            f"{_rate(line.slowest['samples_per_sec'])} {line.unit})")


def _unit_header(frame: pd.DataFrame) -> str:
    units = {per_second(str(unit)) for unit in frame["sample_unit"]}
    return units.pop() if len(units) == 1 else "samples/s"


def ranking_table(ranked: pd.DataFrame, shown: Sequence[str]) -> str:
    """Every row: rank, the settings that differ, the rate and its spread, the work done, flags and source."""
    lead = (["workload"] if ranked["workload"].nunique() > 1 else []) + \
        (["device"] if "device" not in shown and ranked["device"].map(str).nunique() > 1 else [])
    work = [name for name in ("tokens_per_sec", "mfu") if ranked[name].notna().any()]
    several = ranked["sample_unit"].nunique() > 1
    header = ["rank", *lead, *(_title(name) for name in shown), _unit_header(ranked), *(["unit"] if several else []),
              "over", "CV %", "spread %", "s per window", *({"tokens_per_sec": "tokens/s", "mfu": "MFU %"}[name]
                                                              for name in work), "flags", "source"]
    rows = []
    for row in ranked.to_dict("records"):
        over = f"{row['n']} {row['sample'] if row['n'] != 1 else str(row['sample']).removesuffix('s')}"
        workload = [workload_title(row["workload"], row.get("size"))] if "workload" in lead else []
        rows.append([int(row["rank"]), *workload, *([row["device"]] if "device" in lead else []),
                     *(row[name] for name in shown), row["samples_per_sec"],
                     *([per_second(str(row["sample_unit"]))] if several else []), over, row["cv_pct"],
                     row["spread_pct"], row["per_window_s"],
                     *(row[name] * 100 if name == "mfu" and row[name] is not None else row[name] for name in work),
                     "; ".join(row["flags"]), row["source"]])
    return table(header, rows, [bool(row["flags"]) for row in ranked.to_dict("records")])


def headline_section(data: ReportData) -> Section:
    title = "Best settings and ranking"
    frame = rows_of(data)
    if frame.empty:
        return Section("headline", title, None, "No throughput run or campaign measured a setting (an ok batch "
                       "size): nothing to rank.")
    ranked = ranking(frame)
    names = setting_names(frame)
    shown = varying(ranked, names)
    said = [name for name in names if name not in shown]
    parts = []
    for line in headlines(frame):
        named = [name for name in names if name not in SPACE and (name in shown or name in NAMED)]  # SPACE: titled
        parts.append(f"<p><strong>{html.escape(_headline_text(line, named))}</strong></p>")
        if line.best["flags"]:
            parts.append(paragraph(f"Its flags: {'; '.join(line.best['flags'])}.", "warn"))
    constant = ", ".join(part for name in said if (part := phrase(name, ranked[name].iloc[0])))
    parts += [heading(f"Ranking of every measured setting ({len(ranked)})"),
              paragraph(f"All rows: {constant}." if constant else "No setting is shared by every row.", "note"),
              paragraph("One row per measured setting: each ok batch size of a throughput run (its samples/s over "
                        "all its timed windows; CV and spread over the windows' own samples/s) and each campaign "
                        "configuration and batch size (the median over its ok repetitions; CV and spread over the "
                        "repetitions). Ranked fastest first within each workload and device; rows with a trust flag "
                        "are shaded. ranking.csv beside this page holds the same table with every setting, to sort "
                        "and filter.", "note"),
              ranking_table(ranked, shown)]
    return Section("headline", title, "".join(parts))


# --- the comparisons -------------------------------------------------------------------------------------------


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
    unit = _unit_header(frame)
    header = [f"{_title(setting)}: A -> B", "where", f"A {unit}", f"B {unit}",
              f"change ({CONFIDENCE * 100:g} % interval)", "verdict", "why", "flags", "A", "B"]
    rows = []
    for each in found:
        where = described(each.a, context)
        if several:
            where = f"{workload_title(each.a['workload'], each.a.get('size'))}: {where}"
        rows.append([f"{cell_text(each.a[setting])} -> {cell_text(each.b[setting])}", where,
                     each.a["samples_per_sec"], each.b["samples_per_sec"], change_text(each), _verdict_word(each),
                     each.verdict.text, _flags(each), each.a["source"], each.b["source"]])
    return table(header, rows, [not each.comparable or each.verdict.significant is None for each in found])


def _uncompared_part(found: Pairs) -> str:
    if not found.uncompared:
        return ""
    total = sum(item.pairs for item in found.uncompared)
    shown = found.uncompared[:MAX_UNCOMPARED]
    rows = [[len(item.settings), ", ".join(_title(name) for name in item.settings), item.pairs,
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
        parts += [heading(f"{_title(setting)} ({len(compared) + left} pair{'s' if len(compared) + left > 1 else ''})"),
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
