"""A run's GPU telemetry timeline as one figure (PNG): SM clock, power and temperature against time, per GPU.

Reads ``telemetry/batch_<X>.csv`` (columns and events: ``trainbench.telemetry.schema``). The files come from
workers that may have been killed, so reading never raises on a partial file: an empty file, a header alone or a
last line cut short are read for what they hold, and a file that cannot be read at all is skipped.

- ``read_timeline``: every batch size's rows in one frame, with ``batch_size`` from the file name; a value that is
  no reading (a text, NaN, infinite, negative) is missing, and ``timeline_problems`` names it (file and field).
- ``timed_spans``: the timed windows, as the figure shades them.
- ``throttled_samples``: the sample rows limited by power or temperature, as the figure marks them.
- ``telemetry_figure``: the figure (None without a sample row); ``plot_telemetry`` writes it (False: nothing
  written).
"""

from __future__ import annotations

import functools
import io
import re
from pathlib import Path
from typing import TYPE_CHECKING

from trainbench.telemetry.schema import (
    EVENT_SAMPLE,
    EVENT_WINDOW_END,
    EVENT_WINDOW_START,
    POWER_REASONS,
    REASON_BITS,
    TELEMETRY_FIELDS,
    THERMAL_REASONS,
)

if TYPE_CHECKING:  # pandas (~0.3 s) is imported where used: bench.sweep imports this module at its start
    import pandas as pd
    from matplotlib.figure import Figure

BATCH_SIZE = "batch_size"  # the column read_timeline adds, from batch_<X>.csv
_FILE_NAME = re.compile(r"batch_(\d+)\.csv")
_TEXT_FIELDS = ("event", "phase")
# Whole numbers that may be missing (a sample row has no step before the first one, an event row no gpu): Int64.
_INTEGER_FIELDS = ("window", "step", "gpu", "clock_event_reasons")
_LIMIT_MASK = sum(REASON_BITS[name] for name in {*POWER_REASONS, *THERMAL_REASONS})  # distinct bits: sum = or

# The panels, top to bottom: (column, y label).
PANELS: tuple[tuple[str, str], ...] = (
    ("sm_clock_mhz", "SM clock (MHz)"),
    ("power_w", "power (W)"),
    ("temperature_c", "temperature (°C)"),
)


def read_timeline(telemetry_dir: Path) -> pd.DataFrame:
    """Every ``batch_<X>.csv`` in ``telemetry_dir``, one frame in time order: the schema's columns (numbers as
    float64, or Int64 where whole) and ``batch_size``. What a killed worker left half-written is dropped, never
    raised on: callers draw or summarise what was measured. A value that is no reading (a text, NaN, infinite,
    negative) is missing (``timeline_problems`` names them). An absent folder reads as no rows."""
    return _read_all(telemetry_dir)[0]


def timeline_problems(telemetry_dir: Path) -> list[str]:
    """Per file and field, the values ``read_timeline`` left out as no reading: how many, and the first one."""
    return _read_all(telemetry_dir)[1]


def _read_all(telemetry_dir: Path) -> tuple[pd.DataFrame, list[str]]:
    import pandas as pd

    frames, problems = [], []
    for path in sorted(telemetry_dir.glob("batch_*.csv")):
        match = _FILE_NAME.fullmatch(path.name)
        if match is None:
            continue
        frame, found = _read_one(path)
        problems += found
        if frame is not None and len(frame):
            frames.append(frame.assign(**{BATCH_SIZE: int(match.group(1))}))
    if not frames:
        return _empty_timeline().copy(), problems
    timeline = pd.concat(frames, ignore_index=True)
    # Within a flush the sampler writes in time order, but an event can land in the next flush: sort (stably).
    return timeline.sort_values("time_s", kind="stable", ignore_index=True), problems


@functools.cache
def _empty_timeline() -> pd.DataFrame:
    """The typed frame of no rows, made once: typing costs milliseconds even empty, and most CPU runs (no GPU to
    sample) have no timeline at all, which a report of hundreds of runs would pay twice a run."""
    import pandas as pd

    return _typed(pd.DataFrame({field: [] for field in TELEMETRY_FIELDS}).assign(**{BATCH_SIZE: []}))


def _read_one(path: Path) -> tuple[pd.DataFrame | None, list[str]]:
    """One file's rows, typed, and its values that are no reading; None when it holds no readable header."""
    import pandas as pd

    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None, []
    if not text.endswith("\n"):
        # The writer ends every row with a line end: what follows the last one is a row cut short by a kill,
        # whose last field may be a prefix of the real number (12 for 123.4). Dropped rather than misread.
        text = text[: text.rfind("\n") + 1]
    if not text.strip():
        return None, []
    try:
        raw = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, on_bad_lines="skip")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError):
        return None, []
    if "time_s" not in raw.columns or "event" not in raw.columns:
        return None, []  # not a timeline
    raw = raw.reindex(columns=list(TELEMETRY_FIELDS), fill_value="")
    frame = _typed(raw)
    problems = [_problem(path, field, raw[field], frame[field]) for field in TELEMETRY_FIELDS
                if field not in _TEXT_FIELDS]
    return frame[frame["time_s"].notna() & frame["event"].ne("")], [problem for problem in problems if problem]


def _problem(path: Path, field: str, raw: pd.Series, typed: pd.Series) -> str:
    """The values of a column that were written (not empty) but read as missing: how many, the first one."""
    lost = raw[(raw.str.strip() != "") & typed.isna()]
    if lost.empty:
        return ""
    return (f"{path}: {field}: {len(lost)} value{'s' if len(lost) > 1 else ''} not a finite non-negative number "
            f"(first {lost.iloc[0]!r})")


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """The schema's types: text stays text; a value that is no reading (a text, NaN, infinite, negative: every
    number of the schema is a time, count, index or reading that cannot be below 0) becomes missing rather than an
    error or a point drawn."""
    import numpy as np
    import pandas as pd

    typed = {}
    for field in frame.columns:
        if field in _TEXT_FIELDS:
            typed[field] = frame[field].astype(str)
        elif field == BATCH_SIZE:
            typed[field] = frame[field].astype("int64")
        else:
            numbers = pd.to_numeric(frame[field], errors="coerce").astype("float64")
            numbers = numbers.where(np.isfinite(numbers) & numbers.ge(0))
            if field in _INTEGER_FIELDS:
                numbers = numbers.where(numbers.mod(1).eq(0)).astype("Int64")  # 1.5 in a whole field: missing
            typed[field] = numbers
    return pd.DataFrame(typed, index=frame.index)


def timed_spans(frame: pd.DataFrame) -> list[tuple[float, float, int]]:
    """(start, end, batch size) of every timed window, in ``time_s``, by start. A window whose worker was killed
    before its end runs to that batch size's last row (it was timed until then); an end without a start is
    left out (nothing says where it began). Several writers of one window: the earliest start, the latest end."""
    spans = []
    for (batch, _window), rows in frame.groupby([BATCH_SIZE, "window"], dropna=False, sort=False):
        starts = rows.loc[rows["event"] == EVENT_WINDOW_START, "time_s"]
        ends = rows.loc[rows["event"] == EVENT_WINDOW_END, "time_s"]
        if starts.empty:
            continue
        end = ends.max() if not ends.empty else frame.loc[frame[BATCH_SIZE] == batch, "time_s"].max()
        spans.append((float(starts.min()), float(end), int(batch)))
    return sorted(spans)


def throttled_samples(frame: pd.DataFrame) -> pd.DataFrame:
    """The sample rows whose clock-event reasons have a power or thermal bit set (``POWER_REASONS``,
    ``THERMAL_REASONS``): where the clock was held down by the power cap or heat, not by the workload."""
    samples = frame[frame["event"] == EVENT_SAMPLE]
    limited = (samples["clock_event_reasons"] & _LIMIT_MASK).fillna(0).ne(0)
    return samples[limited.astype(bool)]


def plot_telemetry(telemetry_dir: Path, path: Path, title: str) -> bool:
    """``telemetry_figure`` written to ``path``. False, and no file, without a sample: an empty figure would look
    like a measurement."""
    figure = telemetry_figure(telemetry_dir, title)
    if figure is None:
        return False
    figure.savefig(path)
    return True


def telemetry_figure(telemetry_dir: Path, title: str) -> Figure | None:
    """The run's timeline: one panel per measure (``PANELS``) sharing a time axis, one line per GPU, the timed
    windows shaded, power or thermal limits marked on the clock; None without a sample row."""
    from matplotlib.figure import Figure  # a Figure of its own, no pyplot: see render.plot
    from matplotlib.transforms import blended_transform_factory

    frame = read_timeline(telemetry_dir)
    samples = frame[(frame["event"] == EVENT_SAMPLE) & frame["gpu"].notna()]
    if samples.empty:
        return None
    origin = float(frame["time_s"].min())
    gpus = sorted(int(gpu) for gpu in samples["gpu"].unique())
    figure = Figure(figsize=(10, 7.5), dpi=120)
    panels = figure.subplots(len(PANELS), 1, sharex=True)
    for axes, (field, ylabel) in zip(panels, PANELS, strict=True):
        for gpu in gpus:
            x, y = _segments(samples[samples["gpu"] == gpu], field, origin)
            axes.plot(x, y, linewidth=1, label=f"GPU {gpu}" if len(gpus) > 1 else "_nolegend_")
        axes.set_ylabel(ylabel)
        axes.grid(True, alpha=0.3)
    labelled: set[int] = set()
    label_at = blended_transform_factory(panels[0].transData, panels[0].transAxes)
    for start, end, batch in timed_spans(frame):
        for axes in panels:
            axes.axvspan(start - origin, end - origin, color="tab:green", alpha=0.12, linewidth=0)
        if batch not in labelled:
            labelled.add(batch)
            panels[0].text(start - origin, 0.98, f"batch {batch}", transform=label_at, rotation=90,
                           ha="left", va="top", fontsize=8, color="tab:green")
    limited = throttled_samples(samples)
    if not limited.empty:
        panels[0].plot(limited["time_s"] - origin, limited["sm_clock_mhz"], linestyle="none", marker="|",
                       markersize=5, color="tab:red", label="power or thermal limit")
    if len(gpus) > 1 or not limited.empty:
        panels[0].legend(fontsize=8, loc="lower right")
    panels[0].set_title(title)
    panels[-1].set_xlabel("seconds since the run's first telemetry row")
    figure.tight_layout()
    return figure


def _segments(rows: pd.DataFrame, field: str, origin: float) -> tuple[list[float], list[float]]:
    """One GPU's points, batch size after batch size, with a break between them: each batch size is a worker of
    its own, and a line across the gap would draw readings nobody took."""
    x: list[float] = []
    y: list[float] = []
    for _batch, part in rows.groupby(BATCH_SIZE, sort=False):
        if x:
            x.append(float("nan"))
            y.append(float("nan"))
        x.extend((part["time_s"] - origin).tolist())
        y.extend(part[field].astype("float64").tolist())
    return x, y
