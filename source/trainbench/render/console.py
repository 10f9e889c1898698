"""The tables printed at the end of a sweep, from the results model's rows (``BatchResult.to_row``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainbench import workloads
from trainbench.results import fields
from trainbench.results.fields import Field, Group
from trainbench.results.records import Status
from trainbench.results.trust import trust_text

LEAD_COLUMNS = ("batch", "status")
ALWAYS = (Group.THROUGHPUT, Group.TIMING)  # shown on every table; the spread only with more than one window
# The console's column groups, in order; a field of any other group is shown when some row holds a value for it.
ORDER = (*ALWAYS, Group.SPREAD, Group.INPUT)


def console_fields() -> list[Field]:
    """The fields with a console header (``Field.console``), grouped in ``ORDER``, registry order within a group."""
    named = [f for f in fields.FIELDS if f.console]
    rank = {group: i for i, group in enumerate(ORDER)}
    return sorted(named, key=lambda f: rank.get(f.group, len(ORDER)))


def _headers(*groups: Group) -> tuple[str, ...]:
    return tuple(f.console for f in console_fields() if f.group in groups)


COLUMNS = (*LEAD_COLUMNS, *_headers(*ALWAYS))  # as the registry declares them when this module is imported
WINDOW_COLUMNS = _headers(Group.SPREAD)  # only for runs with --windows above 1
INPUT_COLUMNS = _headers(Group.INPUT)  # only for runs on real data


def per_second(sample_unit: str) -> str:
    """A workload's rate unit from its sample unit (``Workload.sample_unit``): "image" -> "images/s"."""
    return f"{sample_unit}s/s"


def workload_title(name: Any, size: Any = None) -> str:
    """A run's network by name and size: "BERT-base", or "tiny BERT-base" for the small network of the same
    structure (38,402 parameters are no BERT-base). From its header's name (files without one: ResNet-50; a name
    this trainbench does not know: the name); no size or "full": the published network."""
    name = str(name or workloads.DEFAULT)
    title = workloads.get(name).title if name in workloads.names() else name
    return title if size in (None, "full") else f"{size} {title}"


def sample_unit_of(header: dict[str, Any]) -> str:
    """What a run's samples/s counts ("image"), from its header (files without one: ResNet-50's images)."""
    return str(header.get("sample_unit") or "image")


def unit_header(header: str, sample_unit: str) -> str:
    """A console header in the workload's unit: "samples/s" -> "images/s", "min samples/s" -> "min images/s"."""
    return header.replace("samples/s", per_second(sample_unit))


# Cells shown in another scale than the field's unit (the header says which): seconds as ms, FLOP/s as TFLOP/s,
# fractions as percent, bytes as MiB ("peak memory MiB").
SCALE = {"s": 1e3, "FLOP/s": 1e-12, "fraction": 1e2, "B": 2.0**-20}


def _text(f: Field, value: Any) -> str:
    """A cell: seconds as milliseconds, FLOP/s as TFLOP/s, fractions as percent, bytes as MiB (the header says so),
    rates to two decimals, flags as yes/no."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if f.unit in SCALE:
        return f"{value * SCALE[f.unit]:.2f}"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _shown(f: Field, results: Sequence[dict[str, Any]]) -> bool:
    if f.group in ALWAYS:
        return True
    if f.group is Group.SPREAD:
        return any((result.get("windows") or 1) > 1 for result in results)
    if f.name in fields.BESIDE:  # shown where it differs from its counterpart, which it repeats otherwise
        return any(result.get(f.name) is not None and result.get(f.name) != result.get(fields.BESIDE[f.name])
                   for result in results)
    return any(result.get(f.name) is not None for result in results)


def _row(result: dict[str, Any], shown: Sequence[Field]) -> tuple[str, ...]:
    ok = result["status"] == Status.OK
    always = [_text(f, result.get(f.name)) if ok else "" for f in shown if f.group in ALWAYS]
    others = [_text(f, result.get(f.name)) for f in shown if f.group not in ALWAYS]
    return (str(result["batch_size"]), str(result["status"]), *always, *others)


def format_table(results: Sequence[dict[str, Any]], sample_unit: str = "sample") -> str:
    """A fixed-width table, one line per batch size (the fields with a console header: ``console_fields``), with
    failures' messages listed below it, then the ok results' trust flags (``results.trust``); rates in the
    workload's ``sample_unit`` ("images/s")."""
    shown = [f for f in console_fields() if _shown(f, results)]
    header = (*LEAD_COLUMNS, *(unit_header(f.console, sample_unit) for f in shown))
    lines = aligned([header, *(_row(result, shown) for result in results)])
    lines.extend(f"batch {r['batch_size']} {r['status']}: {r['error']}" for r in results if r["status"] != Status.OK)
    lines.extend(trust_lines(results))
    return "\n".join(lines)


def trust_lines(results: Sequence[dict[str, Any]]) -> list[str]:
    """"batch 8 trust: windows of 1.2 s, ..." for each ok result that a trust check flags."""
    flagged = ((r["batch_size"], trust_text(r)) for r in results if r["status"] == Status.OK)
    return [f"batch {batch} trust: {text}" for batch, text in flagged if text]


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
