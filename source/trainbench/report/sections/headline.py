"""The page's first section: the best setting per workload and device, and the ranking of every measured setting
(``report/ranking.py``'s rows)."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from trainbench.render.console import per_second, workload_title
from trainbench.render.page import Section, cell_text, heading, paragraph, table
from trainbench.render.plot import PEAK_MEMORY
from trainbench.render.readable import size_text
from trainbench.report.found import ReportData
from trainbench.report.ranking import SPACE, WORK, Headline, headlines, ranking, setting_names, varying
from trainbench.report.sections.common import differs_from_model
from trainbench.report.sections.settings import described, phrase, rows_of, setting_cell, title_of, unit_header
from trainbench.workloads.settings import shape_words

NAMED = ("framework", "precision", "batch_size")  # always in a headline's description of a setting


def _spread(row: Mapping[str, Any]) -> str:
    """"spread 3.1 % over 3 windows", or "1 window, no spread"."""
    sample = str(row["sample"])
    if row["n"] < 2 or row["spread_pct"] is None:
        return f"{row['n']} {sample.removesuffix('s') if row['n'] == 1 else sample}, no spread"
    return f"spread {row['spread_pct']:.1f} % over {row['n']} {sample}"


def _rate(value: float) -> str:
    return cell_text(float(value))


def _headline_title(line: Headline) -> str:
    """"tiny BERT-base at seq_len 32 on cpu": the network by its size, the sample's shape, the device."""
    shape = " ".join(shape_words(line.best))
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


_WORK_HEADERS = {"tokens_per_sec": "tokens/s", "mfu": "MFU %", "hfu": "HFU %", PEAK_MEMORY: "peak memory"}


def _work_cell(name: str, value: Any) -> Any:
    """MFU and HFU in %, the peak memory in the unit it reads best in ("1.534 GiB"), tokens/s as they are."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if name in ("mfu", "hfu"):
        return value * 100
    return size_text(value) if name == PEAK_MEMORY else value


def ranking_table(ranked: pd.DataFrame, shown: Sequence[str]) -> str:
    """Every row: rank, the settings that differ, the rate and its spread, the work done and the peak memory (where
    recorded; HFU beside MFU where some row's differs from it: a checkpointed step's), flags and source."""
    lead = (["workload"] if ranked["workload"].nunique() > 1 else []) + \
        (["device"] if "device" not in shown and ranked["device"].map(str).nunique() > 1 else [])
    records = ranked.to_dict("records")
    work = [name for name in (*WORK, PEAK_MEMORY) if ranked[name].notna().any()
            and (name != "hfu" or differs_from_model(name, records))]
    several = ranked["sample_unit"].nunique() > 1
    header = ["rank", *lead, *(title_of(name) for name in shown), unit_header(ranked), *(["unit"] if several else []),
              "over", "CV %", "spread %", "s per window", *(_WORK_HEADERS[name] for name in work), "flags", "source"]
    rows = []
    for row in records:
        over = f"{row['n']} {row['sample'] if row['n'] != 1 else str(row['sample']).removesuffix('s')}"
        workload = [workload_title(row["workload"], row.get("size"))] if "workload" in lead else []
        rows.append([int(row["rank"]), *workload, *([row["device"]] if "device" in lead else []),
                     *(setting_cell(name, row[name]) for name in shown), row["samples_per_sec"],
                     *([per_second(str(row["sample_unit"]))] if several else []), over, row["cv_pct"],
                     row["spread_pct"], row["per_window_s"],
                     *(_work_cell(name, row[name]) for name in work),
                     "; ".join(row["flags"]), row["source"]])
    return table(header, rows, [bool(row["flags"]) for row in records])


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
