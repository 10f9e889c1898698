"""Every measured setting as one row, the best per workload and device, and the pairs that differ in one setting.

A row is one ok batch size of a throughput run (its samples are its timed windows' own samples/s) or one
configuration x batch size of a campaign (its samples are its ok repetitions' samples/s; its rate is their median,
as ``campaign summary`` gives it). Its settings are what the run's header records (framework, precision, device,
size (a file from before sizes: "full", ``results.header.BEFORE_SIZES``; a campaign run without a readable summary:
its size axis, else the matrix's default "full"; never empty), image size, sequence length, data, compile / CUDA
graph / XLA / channels-last, how the step ran: matmul precision and optimizer (unknown, None, in files from before
format 5), activation checkpointing and shard (none and ddp in files from before format 6: what they ran), processes,
the GPU's name from env.json and the batch size), read the same way for a run and for a campaign's runs, so that a
campaign row and a run row of the same setting pair.
Beside the rate, a row holds what was recorded of the work and the memory: tokens/s, MFU, HFU (MFU with the
recomputed forward counted: MFU's value without recomputation) and the peak memory (a campaign's: the median over its
ok repetitions).

Pairs are the rows of one workload that differ in exactly one setting (``results.run_settings.one_setting_pairs``:
batch sizes with their neighbours only), each compared by ``results.significance.compare_rates``: B is the later
row (the larger batch size). Rows that differ in several settings are not compared; they are counted by the settings
they differ in. Everything here is data: ``report/sections/headline.py`` and ``comparisons.py`` draw it,
``report/gather.py`` writes the ranking as CSV.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from trainbench.campaign.matrix.values import AXIS_DEFAULTS
from trainbench.render.console import per_second
from trainbench.render.plot import PEAK_MEMORY
from trainbench.report.found import Campaign, ReportData, RunRecord
from trainbench.results import fields
from trainbench.results.header import BEFORE_FORMAT_6, WORKLOAD, RunHeader
from trainbench.results.records import Status
from trainbench.results.run_settings import (
    STEP,
    Pair,
    one_setting_pairs,
    pairs_by_difference,
    settings_as_run,
    step_as_run,
)
from trainbench.results.significance import Verdict, compare_rates, window_rates
from trainbench.results.trust import trust_flags, window_spread, worst_of
from trainbench.workloads.settings import SHAPES

# The settings a row names, in the order the page shows them; workload is the group, never a setting. Of the
# declared shape settings (workloads.settings), the shapes: another one (num_classes) is a setting where a
# campaign varies it, as its own axis.
SETTINGS = ("framework", "precision", "device", "size", *SHAPES, "data", "compile", "cuda_graph", "xla",
            "channels_last", *STEP, "gpus", "gpu", "batch_size")
SYNTHETIC = "synthetic"
WINDOWS, REPETITIONS = "windows", "repetitions"
ADVICE = {WINDOWS: "--windows 3", REPETITIONS: "a matrix with repeats: 3"}  # how to get enough samples
MAX_PAIRS = 30  # pairs shown per differing setting
MAX_UNCOMPARED = 12  # combinations of differing settings listed as not compared
# The measured columns after the settings (the CSV's and the page's order).
MEASURES = ("samples_per_sec", "sample", "n", "cv_pct", "spread_pct", "per_window_s", "tokens_per_sec", "mfu", "hfu",
            PEAK_MEMORY, "flags", "source")
WORK = ("tokens_per_sec", "mfu", "hfu")  # a run's as recorded, a campaign's the median over its ok repetitions


# --- one row per measured setting ----------------------------------------------------------------------------


def _missing(value: Any) -> bool:
    return value is None or (not isinstance(value, list | tuple | dict) and bool(pd.isna(value)))


def _plain(value: Any) -> Any:
    """A cell as a plain value: None for a blank, a Python number for numpy's."""
    if _missing(value):
        return None
    return value.item() if hasattr(value, "item") else value


def _number(value: Any) -> float | None:
    value = _plain(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _gpu_names(data: ReportData) -> dict[Path, str]:
    """Each folder holding an env.json: its GPUs' names ("NVIDIA H100 80GB HBM3"; several distinct ones joined)."""
    names = {}
    for environment in data.environments:
        gpus = (environment.env.get("gpu") or {}).get("gpus") or []
        found = list(dict.fromkeys(str(gpu.get("name")) for gpu in gpus if gpu.get("name")))
        for folder in environment.folders:
            if found:
                names[folder] = " + ".join(found)
    return names


def settings_of(header: Mapping[str, Any], gpu: str | None = None) -> dict[str, Any]:
    """What a run measured, from its header (``RunHeader``'s fields and its model configuration); the GPU's name
    only off the CPU (a CPU run on a GPU machine measured no GPU)."""
    read = RunHeader.read(header)
    model, launch = read.model, read.launch or {}
    data = read.data or SYNTHETIC
    compiled = model.get("compile")
    world = _count(launch.get("processes_per_node")) * _count(launch.get("nodes"))
    shapes = settings_as_run(read)
    return {"framework": read.framework, "precision": read.precision, "device": read.device, "size": read.size,
            **{name: shapes[name] for name in SHAPES}, "data": data if data == SYNTHETIC else Path(str(data)).name,
            "compile": (model.get("compile_mode") or "default") if compiled else compiled,
            "cuda_graph": model.get("cuda_graph"), "xla": model.get("xla"), "channels_last": model.get("channels_last"),
            **step_as_run(read), "gpus": world, "gpu": gpu if read.device not in (None, "cpu") else None}


def _bytes(value: Any) -> int | None:
    """A size as whole bytes (a median of two may fall on a half): ranking.csv holds 3221225472, not 3.2e9."""
    number = _number(value)
    return None if number is None else round(number)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 1


def _per_window(values: Mapping[str, Any]) -> float | None:
    total = _number(values.get("window_s"))
    return None if total is None else total / (_number(values.get("windows")) or 1.0)


def _ok(row: Mapping[str, Any]) -> bool:
    return row.get("status") == Status.OK and _number(row.get(fields.SAMPLES_PER_SEC)) is not None


def run_rows(run: RunRecord, gpu: str | None = None) -> list[dict[str, Any]]:
    """One row per ok batch size of a throughput run."""
    header = RunHeader.read(run.header)
    settings = settings_of(run.header, gpu)
    rows = []
    for values in filter(_ok, run.rows):
        samples = window_rates(values)
        spread = window_spread(samples)  # files from before the window's spread was recorded too
        cv = _number(values.get("window_cv_pct")) if values.get("window_cv_pct") is not None else \
            spread["window_cv_pct"]
        spread_pct = _number(values.get("window_spread_pct")) if values.get("window_spread_pct") is not None else \
            spread["window_spread_pct"]
        rows.append({"workload": header.workload, "sample_unit": header.sample_unit, **settings,
                     "batch_size": values["batch_size"], "samples_per_sec": float(values[fields.SAMPLES_PER_SEC]),
                     "sample": WINDOWS, "samples": samples, "n": len(samples), "cv_pct": cv, "spread_pct": spread_pct,
                     "per_window_s": _per_window({"windows": header.timing and header.timing.windows, **values}),
                     **{name: _number(values.get(name)) for name in WORK},
                     PEAK_MEMORY: _bytes(values.get(PEAK_MEMORY)), "flags": trust_flags(values),
                     "source": run.shown_name})
    return rows


def _axes(table: pd.DataFrame) -> list[str]:
    """The matrix's axis columns (campaign.table puts them between sample_unit and batch_size)."""
    names = list(table.columns)
    if "sample_unit" not in names or "batch_size" not in names:
        return []
    return names[names.index("sample_unit") + 1:names.index("batch_size")]


def _from_axes(row: Mapping[str, Any]) -> dict[str, Any]:
    """A configuration's settings as its matrix's axes asked for them (the table's columns): what a run's header
    does not record, or all of them when its summary cannot be read."""
    data, compiled = _plain(row.get("data")) or SYNTHETIC, _plain(row.get("compile"))
    return {"framework": _plain(row.get("framework")), "precision": _plain(row.get("precision")),
            "device": _plain(row.get("device")),
            # no size axis (or none for this run): the matrix's default, what it ran (a header's size comes first)
            "size": _plain(row.get("size")) or AXIS_DEFAULTS["size"],
            **{name: _plain(row.get(name)) for name in SHAPES},
            "data": data if data == SYNTHETIC else Path(str(data)).name,
            "compile": "default" if compiled is True else compiled,
            "cuda_graph": _plain(row.get("cuda_graph")), "xla": _plain(row.get("xla")),
            "channels_last": _plain(row.get("channels_last")), "matmul_precision": _plain(row.get("matmul_precision")),
            "optimizer": _optimizer_name(_plain(row.get("optimizer"))),
            # format 6's: the axis's or the run's record; empty (no axis; one process records no shard): what ran
            **{name: _plain(row.get(name)) or default for name, default in BEFORE_FORMAT_6.items()},
            "gpus": _plain(row.get("gpus")) or 1, "gpu": None}


def _optimizer_name(value: Any) -> Any:
    """The optimizer's name from results.csv's cell: the axis's ("adamw") or the run's record, which names its
    implementation after it ("adamw (torch, fused)")."""
    return value.split(" ")[0] if isinstance(value, str) else value


def campaign_rows(campaign: Campaign, gpus: Mapping[Path, str] | None = None) -> list[dict[str, Any]]:
    """One row per configuration x batch size with an ok repetition: the median over repetitions, the
    repetitions' samples/s as its samples. Axes the suite's settings do not name (seed, loader...) are settings too
    where they vary within the campaign."""
    table = campaign.table
    if table.empty or "run_folder" not in table.columns:
        return []
    results = table.drop_duplicates(["run_folder", "batch_size"])
    extra = [axis for axis in _axes(table) if axis not in SETTINGS and results[axis].nunique(dropna=False) > 1]
    summary = {(str(row["config"]), _plain(row["batch_size"])): row for row in campaign.summary.to_dict("records")}
    rows = []
    for (config, batch), group in results.groupby(["config", "batch_size"], sort=False):
        ok = [row for row in group.to_dict("records") if _ok(row)]
        stats = summary.get((str(config), _plain(batch)))
        if not ok or stats is None or _number(stats["samples_per_sec_median"]) is None:
            continue
        rows.append(_campaign_row(campaign, str(config), int(batch), ok, stats, extra, gpus or {}))
    return rows


def _campaign_row(campaign: Campaign, config: str, batch: int, ok: list[dict[str, Any]], stats: Mapping[str, Any],
                  extra: Sequence[str], gpus: Mapping[Path, str]) -> dict[str, Any]:
    first = ok[0]
    folder = campaign.path / str(first["run_folder"])
    run = campaign.runs.get(str(first["run_folder"]))
    asked = _from_axes(first)
    settings = settings_of(run.header, gpus.get(folder)) if run is not None else asked
    # what the header does not record, the matrix asked for; processes: the axis (a header without its launch)
    settings |= {name: value for name, value in asked.items() if settings.get(name) is None and value is not None}
    if "gpus" in first and _plain(first["gpus"]) is not None:
        settings["gpus"] = _plain(first["gpus"])
    values = [_result(campaign, str(row["run_folder"]), batch) or row for row in ok]
    flags = trust_flags(worst_of(values))
    per_window = [seconds for each in values if (seconds := _per_window(each)) is not None]
    work = {name: _median([_number(row.get(name)) for row in ok]) for name in WORK}
    work[PEAK_MEMORY] = _bytes(_median([_number(row.get(PEAK_MEMORY)) for row in ok]))
    unit = _plain(first.get("sample_unit"))
    return {"workload": _plain(first.get("workload")) or WORKLOAD, "sample_unit": unit or "sample", **settings,
            **{axis: _plain(first.get(axis)) for axis in extra}, "batch_size": batch,
            "samples_per_sec": float(stats["samples_per_sec_median"]), "sample": REPETITIONS,
            "samples": [float(row[fields.SAMPLES_PER_SEC]) for row in ok], "n": len(ok),
            "cv_pct": _number(stats.get("cv_pct")), "spread_pct": _number(stats.get("spread_pct")),
            "per_window_s": _median(per_window), **work, "flags": flags,
            "source": f"campaign {campaign.path.name}: {config}"}


def _result(campaign: Campaign, run_folder: str, batch: int) -> dict[str, Any] | None:
    """A campaign run's result of one batch size, as its summary.json holds it (the table leaves some out)."""
    run = campaign.runs.get(run_folder)
    found = [row for row in (run.rows if run else []) if row.get("batch_size") == batch]
    return found[0] if found else None


def _median(values: Sequence[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def measured_rows(data: ReportData) -> pd.DataFrame:
    """Every measured setting of the page, runs first then campaigns, in the order found (B of a pair is the later
    row). ``attrs["settings"]``: the setting columns, the suite's then any campaign's own axes."""
    gpus = _gpu_names(data)
    rows = [row for run in data.runs for row in run_rows(run, gpus.get(run.path))]
    rows += [row for campaign in data.campaigns for row in campaign_rows(campaign, gpus)]
    names = [*SETTINGS[:-1], *dict.fromkeys(key for row in rows for key in row if key not in _KNOWN), "batch_size"]
    columns = ["workload", "sample_unit", *names, *MEASURES[:2], "samples", *MEASURES[2:]]
    # as objects from the start: a column of whole numbers and blanks stays whole numbers (64 px, not 64.0)
    frame = pd.DataFrame([[row.get(name) for name in columns] for row in rows], columns=columns, dtype=object)
    frame.attrs["settings"] = names
    return frame


_KNOWN = frozenset({"workload", "sample_unit", *SETTINGS, *MEASURES, "samples"})


def setting_names(frame: pd.DataFrame) -> list[str]:
    return list(frame.attrs.get("settings", SETTINGS))


def settings(row: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    return {name: _plain(row.get(name)) for name in names}


# --- the ranking and its headline ----------------------------------------------------------------------------


# What decides what a sample is: rows that differ in one of these measure different work and are never ranked
# against each other (a tiny BERT at 8 tokens is not "94 x" a full one at 512).
SPACE = ("workload", "size", *SHAPES, "device")


def _space(row: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(repr(_plain(row.get(name))) for name in SPACE)


def ranking(frame: pd.DataFrame) -> pd.DataFrame:
    """Every row, by setting space (``SPACE``: workload, size, shape and device, in the order first seen), fastest
    first, with its rank in its space."""
    if frame.empty:
        return frame.assign(rank=pd.Series(dtype=object))
    spaces = [_space(row) for row in frame.to_dict("records")]
    order = {key: i for i, key in enumerate(dict.fromkeys(spaces))}
    keyed = frame.assign(_group=[order[key] for key in spaces], _rate=frame["samples_per_sec"].astype(float))
    ranked = keyed.sort_values(["_group", "_rate"], ascending=[True, False], kind="stable")
    ranked.insert(0, "rank", ranked.groupby("_group").cumcount() + 1)
    ranked = ranked.drop(columns=["_group", "_rate"]).reset_index(drop=True)
    ranked.attrs = dict(frame.attrs)
    return ranked


def varying(frame: pd.DataFrame, names: Sequence[str]) -> list[str]:
    """The settings whose values differ between rows (the ranking's columns); the others are said once."""
    return [name for name in names if len({repr(_plain(value)) for value in frame[name]}) > 1]


def csv_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The ranking as ranking.csv holds it: every setting, the samples as "a;b;c", the flags joined by "; ", the peak
    memory in whole bytes."""
    ranked = ranking(frame)
    return ranked.assign(samples=[";".join(f"{value:.6g}" for value in samples) for samples in ranked["samples"]],
                         flags=["; ".join(flags) for flags in ranked["flags"]],
                         # whole bytes with blanks, which an object column of ints and None would write as floats
                         **{PEAK_MEMORY: pd.array(ranked[PEAK_MEMORY].tolist(), dtype="Int64")})


@dataclass(frozen=True)
class Headline:
    """The best row of one setting space (``SPACE``) and the slowest, as ranked rows (``ranking``)."""

    workload: str
    device: Any
    best: dict[str, Any]
    slowest: dict[str, Any] | None  # None: one row only
    rows: int

    @property
    def unit(self) -> str:
        return per_second(str(self.best["sample_unit"]))


def headlines(frame: pd.DataFrame) -> list[Headline]:
    found = []
    for _, group in itertools.groupby(ranking(frame).to_dict("records"), key=_space):  # ranked: a space's rows adjoin
        records = list(group)
        found.append(Headline(str(records[0]["workload"]), records[0]["device"], records[0],
                              records[-1] if len(records) > 1 else None, len(records)))
    return found


# --- pairs ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Compared:
    """Two rows that differ in ``setting`` only: A, B (``ranking`` order does not matter) and the verdict."""

    setting: str
    a: dict[str, Any]
    b: dict[str, Any]
    verdict: Verdict
    comparable: bool  # False: windows of a run against repetitions of a campaign (only the change is given)


@dataclass(frozen=True)
class Uncompared:
    """Pairs of rows that differ in the same several settings: how many, and the first one's two sources."""

    settings: tuple[str, ...]
    pairs: int
    example: tuple[str, str]


@dataclass
class Pairs:
    compared: dict[str, list[Compared]] = field(default_factory=dict)  # by the differing setting
    left_out: dict[str, int] = field(default_factory=dict)  # pairs past MAX_PAIRS, by setting
    uncompared: list[Uncompared] = field(default_factory=list)
    same: int = 0  # pairs of rows of the same settings (one setting measured twice)


def _compare(setting: str, a: dict[str, Any], b: dict[str, Any]) -> Compared:
    if a["sample"] != b["sample"]:
        change = 100.0 * (b["samples_per_sec"] / a["samples_per_sec"] - 1.0)
        text = (f"{change:+.1f} %; no test: {a['sample']} of one against {b['sample']} of the other are not "
                "comparable samples")
        return Compared(setting, a, b, Verdict(change, None, None, None, a["n"], b["n"], None, text), False)
    verdict = compare_rates(a["samples"], b["samples"], a["samples_per_sec"], b["samples_per_sec"],
                            sample=str(a["sample"]), advice=ADVICE[str(a["sample"])])
    return Compared(setting, a, b, verdict, True)


def _ordered(pair: Pair, records: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A and B: the earlier row first; for an ordered setting (batch size) the smaller value first."""
    a, b = records[pair.first], records[pair.second]
    if pair.setting == "batch_size" and _number(a["batch_size"]) and _number(b["batch_size"]) and \
            float(a["batch_size"]) > float(b["batch_size"]):
        return b, a
    return a, b


def pairs(frame: pd.DataFrame) -> Pairs:
    """The one-setting pairs of each workload's rows, compared; the others counted by what they differ in."""
    names = setting_names(frame)
    found = Pairs()
    uncompared: dict[tuple[str, ...], Uncompared] = {}
    for _, group in frame.groupby("workload", sort=False):
        records = group.to_dict("records")
        rows = [settings(record, names) for record in records]
        for pair in one_setting_pairs(rows):
            shown = found.compared.setdefault(pair.setting, [])
            if len(shown) >= MAX_PAIRS:
                found.left_out[pair.setting] = found.left_out.get(pair.setting, 0) + 1
                continue
            shown.append(_compare(pair.setting, *_ordered(pair, records)))
        for apart in pairs_by_difference(rows).values():
            if not apart.settings:
                found.same += apart.pairs
            elif len(apart.settings) > 1:
                known = uncompared.get(apart.settings)
                example = tuple(str(records[index]["source"]) for index in apart.example)
                uncompared[apart.settings] = Uncompared(apart.settings, apart.pairs + (known.pairs if known else 0),
                                                        known.example if known else (example[0], example[1]))
    found.uncompared = sorted(uncompared.values(), key=lambda item: (len(item.settings), -item.pairs))
    return found
