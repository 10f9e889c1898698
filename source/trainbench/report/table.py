"""The tables printed at the end of a sweep, from the results model's rows (``BatchResult.to_row``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainbench.results.records import Status

COLUMNS = ("batch", "status", "images/s", "step median ms", "p10 ms", "p90 ms", "MAD ms", "steps")
INPUT_COLUMNS = ("input images/s", "input-bound")  # only for runs on real data
WINDOW_COLUMNS = ("windows", "min images/s", "max images/s")  # only for runs with --repeats


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value * 1000:.2f}"


def _rate(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def _row(result: dict[str, Any], with_input: bool, with_windows: bool) -> tuple[str, ...]:
    if result["status"] != Status.OK:
        cells: tuple[str, ...] = (str(result["batch_size"]), result["status"], "", "", "", "", "", "")
    else:
        cells = (
            str(result["batch_size"]),
            Status.OK.value,
            f"{result['images_per_sec']:.2f}",
            _ms(result["step_time_median_s"]),
            _ms(result["step_time_p10_s"]),
            _ms(result["step_time_p90_s"]),
            _ms(result["step_time_mad_s"]),
            str(result["timed_steps"]),
        )
    if with_windows:
        windows = result.get("windows")
        cells = (*cells, "" if windows is None else str(windows), _rate(result.get("images_per_sec_min")),
                 _rate(result.get("images_per_sec_max")))
    if not with_input:
        return cells
    rate, bound = result.get("input_images_per_sec"), result.get("input_bound")
    return (*cells, _rate(rate), "" if bound is None else ("yes" if bound else "no"))


def format_table(results: Sequence[dict[str, Any]]) -> str:
    """A fixed-width table, one line per batch size, with failures' messages listed below it."""
    with_input = any(result.get("input_images_per_sec") is not None for result in results)
    with_windows = any((result.get("windows") or 1) > 1 for result in results)
    header = COLUMNS + (WINDOW_COLUMNS if with_windows else ()) + (INPUT_COLUMNS if with_input else ())
    lines = aligned([header, *(_row(result, with_input, with_windows) for result in results)])
    lines.extend(f"batch {r['batch_size']} {r['status']}: {r['error']}" for r in results if r["status"] != Status.OK)
    return "\n".join(lines)


def aligned(rows: Sequence[Sequence[str]]) -> list[str]:
    """Right-aligned columns, two spaces apart."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)) for row in rows]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def format_fields(results: Sequence[dict[str, Any]], fields: Sequence[str], width: int = 40) -> str:
    """Any result rows as a table of ``fields`` (long values cut at ``width``), failures' messages below it."""
    rows = [tuple(fields), *(tuple(_cell(r.get(f))[:width] for f in fields) for r in results)]
    lines = aligned(rows)
    lines.extend(f"batch {r['batch_size']} {r['status']}: {r['error']}" for r in results if r["status"] != Status.OK)
    return "\n".join(lines)
