"""The Campaigns and scaling efficiency section: each campaign's summary over its repetitions, what a sample costs
and the memory it takes, and a figure of the rate and one of the peak memory per workload and sample shape."""

from __future__ import annotations

from functools import partial
from typing import Any

import pandas as pd

from trainbench.render.console import per_second, workload_title
from trainbench.render.page import Section, figure_image, heading, paragraph
from trainbench.render.plot import PEAK_MEMORY, batch_size_figure, memory_figure
from trainbench.report.found import Campaign, ReportData
from trainbench.report.sections.common import (
    FIGURE_WIDTH,
    absent,
    campaign_rows,
    capped_note,
    is_invalid,
    left_out_note,
    missing,
    rows_table,
    without_repeats,
    words_table,
)
from trainbench.workloads.settings import SHAPES, shape_words


def _summary_lines(summary: pd.DataFrame) -> dict[str, tuple[list[dict[str, Any]], str]]:
    """The summary as figure lines: one per configuration, a point per batch size with its repetitions' range."""
    lines: dict[str, tuple[list[dict[str, Any]], str]] = {}
    for row in summary.to_dict("records"):
        if missing(row["batch_size"]):
            continue
        point = {"batch_size": int(row["batch_size"]), "status": "ok" if row["ok"] else "error",
                 "repetitions": None if missing(row["ok"]) else int(row["ok"]),
                 **{name: None if missing(row[name]) else row[name] for name in
                    ("samples_per_sec_median", "samples_per_sec_min", "samples_per_sec_max")}}
        lines.setdefault(str(row["config"]), ([], "samples_per_sec_median"))[0].append(point)
    return lines


def campaign_part(campaign: Campaign) -> str:
    summary = campaign.summary
    runs = campaign.table["run_folder"].nunique() if "run_folder" in campaign.table else 0
    parts = [heading(f"campaign {campaign.path.name}"),
             paragraph(f"{runs} finished run folders; one row per configuration and batch size over its "
                       "repetitions (ok of runs); spread (%) = (max - min) / median x 100; CV (%) = standard "
                       "deviation / mean x 100 over the repetitions.", "note")]
    if summary["scaling_efficiency"].notna().any():
        parts.append(paragraph("scaling efficiency: the median samples/s with N processes / (N x the same "
                               "configuration's median with 1 process).", "note"))
    else:
        summary = summary.drop(columns="scaling_efficiency")
        parts.append(paragraph("No scaling efficiency: the matrix has no gpus axis with 1 and more processes.",
                               "note"))
    parts.append(words_table(summary, [not ok for ok in summary["ok"].fillna(0)]))
    invalid = [f"{row.get('run_folder')} batch {row.get('batch_size')}: {row.get('error')}"
               for row in campaign_rows(campaign) if is_invalid(row)]
    parts.append(left_out_note(invalid, "invalid result{s}", "the median, min, max, spread, CV and the figure"))
    if campaign.left_out:
        parts.append(paragraph(f"Not counted: {'; '.join(campaign.left_out)}.", "warn"))
    lines = _summary_lines(campaign.summary)
    workload_of = _config_workloads(campaign.table)
    for workload, configs in _by_workload(lines, workload_of).items():
        parts.append(_campaign_workload_part(campaign, workload, {config: lines[config] for config in configs}))
    return "".join(parts)


_UNKNOWN = "unknown"  # configurations none of whose runs could be read


def _config_workloads(table: pd.DataFrame) -> dict[str, tuple[str, str, str]]:
    """Each configuration's workload, sample unit and sample shape ("64 px", "seq_len 128" where the matrix varies
    it, else ""), as its runs recorded them (results.csv's columns)."""
    known = table.dropna(subset=["workload"]).drop_duplicates("config")
    shapes = [name for name in SHAPES if name in known.columns]
    found = {}
    for row in known.to_dict("records"):
        words = shape_words({name: _whole_text(row[name]) for name in shapes if not missing(row[name])})
        shape = words[0] if words else ""
        unit = row["sample_unit"]
        found[str(row["config"])] = (str(row["workload"]), "sample" if missing(unit) else str(unit), shape)
    return found


def _whole_text(value: Any) -> str:
    """64.0 (a column pandas made float) as "64"."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def _by_workload(lines: dict[str, Any], workload_of: dict[str, tuple[str, str, str]]
                 ) -> dict[tuple[str, str, str], list[str]]:
    """The figure's configurations grouped by (workload, sample unit, shape), in the order first seen: a figure
    each (a 64 px image is not a 224 px one)."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for config in lines:
        groups.setdefault(workload_of.get(config, (_UNKNOWN, "sample", "")), []).append(config)
    return groups


# With HFU, the hardware FLOPs and the parameters one process holds beside MFU, the training FLOPs and the
# parameters, where a configuration's differ (recomputation, FSDP): ``common.without_repeats``.
_WORK = ("parameters", "parameters_held", "train_flops_per_sample", "hardware_flops_per_sample", "tokens_per_sec",
         "achieved_flops", "mfu", "hfu", PEAK_MEMORY)


def _work_rows(campaign: Campaign, configs: list[str]) -> list[dict[str, Any]]:
    """Per configuration and batch size, the median over its ok repetitions of what a sample costs, the tokens/s,
    FLOP/s, MFU and HFU it gave, and its peak memory."""
    rows = [row for row in campaign_rows(campaign) if row.get("config") in configs and row.get("status") == "ok"]
    frame = pd.DataFrame(rows, columns=["config", "batch_size", *_WORK])
    frame[list(_WORK)] = frame[list(_WORK)].apply(pd.to_numeric, errors="coerce")  # a column of blanks: NaN
    medians = frame.groupby(["config", "batch_size"], sort=False)[list(_WORK)].median()
    return [{"config": config, "batch_size": int(batch), **{key: (None if missing(value) else value)
                                                           for key, value in values.items()}}
            for (config, batch), values in medians.to_dict("index").items()]


def _campaign_workload_part(campaign: Campaign, workload: tuple[str, str, str],
                            lines: dict[str, tuple[list[dict[str, Any]], str]]) -> str:
    """One workload's (and shape's) figure in its own unit ("sequences/s"), what its samples cost (tokens/s, FLOPs,
    MFU) and the memory they take (peak memory, and its figure against batch size where recorded)."""
    name, sample_unit, shape = workload
    title, unit = workload_title(name) if name != _UNKNOWN else "unknown workload", per_second(sample_unit)
    title += f", {shape}" if shape else ""
    parts = [heading(f"{title}: {unit}"),
             paragraph(f"samples are {sample_unit}s: samples/s is in {unit}; tokens/s: samples/s x the tokens one "
                       "sample holds, for sequence workloads only; TFLOP/s: samples/s x the training FLOP per sample; "
                       "MFU (%): achieved / the GPUs' dense peak x 100 (empty on the CPU or an unknown GPU); HFU "
                       "(%), where it differs from MFU: the same with the forward recomputed under activation "
                       "checkpointing counted too; peak memory: the highest in use during the timed windows (each a "
                       "median over the ok repetitions).", "note")]
    work = _work_rows(campaign, list(lines))
    if any(row.get(key) is not None for row in work for key in _WORK):
        parts.append(rows_table(("config", "batch_size", *without_repeats(_WORK, work)), work,
                                ("config", "batch_size")))
    bars = any((point.get("repetitions") or 0) >= 2 for points, _ in lines.values() for point in points)
    statistic = f"median {unit} over repetitions" + ("; bars: slowest to fastest repetition" if bars else "")
    parts += [capped_note(len(lines), "configurations", "the table above"), figure_image(
        partial(batch_size_figure, lines, f"campaign {campaign.path.name}: {title}: {statistic}",
                f"median {unit} over repetitions",
                spread=("samples_per_sec_min", "samples_per_sec_max") if bars else None, width=FIGURE_WIDTH,
                sample_unit=sample_unit),
        f"campaign {unit} against batch size{f' ({shape})' if shape else ''}")]
    parts.append(figure_image(partial(memory_figure, _memory_lines(lines, work),
                                      f"campaign {campaign.path.name}: {title}: median over repetitions",
                                      width=FIGURE_WIDTH, sample_unit=sample_unit),
                              f"campaign peak memory against batch size{f' ({shape})' if shape else ''}"))
    return "".join(parts)


def _memory_lines(lines: dict[str, tuple[list[dict[str, Any]], str]],
                  work: list[dict[str, Any]]) -> dict[str, tuple[list[dict[str, Any]], str]]:
    """The figure's lines with each point's median peak memory (``_work_rows``), failed points kept as marks."""
    peaks = {(row["config"], row["batch_size"]): row.get(PEAK_MEMORY) for row in work}
    return {config: ([{**point, PEAK_MEMORY: peaks.get((config, point["batch_size"]))} for point in points],
                     PEAK_MEMORY) for config, (points, _) in lines.items()}


def campaigns_section(data: ReportData) -> Section:
    title = "Campaigns and scaling efficiency"
    if not data.campaigns:
        return absent("campaigns", title, "No campaign folder (campaign.json) in the folders given.")
    return Section("campaigns", title, "".join(campaign_part(campaign) for campaign in data.campaigns))
