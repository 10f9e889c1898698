"""The Performance models section: the Extra-P fits of model.json, with their verdicts, predictions and left-out
checks."""

from __future__ import annotations

from typing import Any

from trainbench.render.page import Section, cell_text, heading, image, paragraph, table
from trainbench.render.readable import VERDICT_RULE, header, percent_error, short_numbers, verdict
from trainbench.report.found import ModelFile, ReportData
from trainbench.report.sections.common import absent, left_out_note
from trainbench.results import fields
from trainbench.results.layout import MODEL_PLOT

_MODEL = ("label", "metric", "function", "verdict", "smape", "adjusted_r2", "rss", "values")
_SECONDS_METRICS = ("step_time", "gpu_time")  # the metrics model.json fits that are no result field


def metric_unit(metric: Any) -> str:
    """A modelled metric's unit: its field's (``results.fields``), seconds for the step and GPU times."""
    if metric in _SECONDS_METRICS:
        return "s"
    found = fields.BY_NAME.get(str(metric))
    return found.unit if found is not None and found.unit != "fraction" else ""


def _model_predictions(model: dict[str, Any]) -> str:
    unit = metric_unit(model.get("metric"))
    items = [f"at {_point(p.get('at'))}: {cell_text(p.get('value'))} {unit}".rstrip()
             + (f" (extrapolated: {', '.join(map(str, p['extrapolated']))})" if p.get("extrapolated") else "")
             for p in model.get("predictions") or []]
    return "; ".join(items)


def _model_checks(model: dict[str, Any]) -> str:
    """Each left-out point: measured, predicted (with the unit), the error in % and whether it was extrapolated."""
    unit = f" {metric_unit(model.get('metric'))}".rstrip()
    items = []
    for check in model.get("checks") or []:
        error = percent_error(check.get("relative_error"))
        items.append(f"left out {_point(check.get('at'))}: measured {cell_text(check.get('measured'))}{unit}, "
                     f"predicted {cell_text(check.get('predicted'))}{unit}" + (f", error {error}" if error else "")
                     + (" (extrapolated)" if check.get("extrapolated") else ""))
    return "; ".join(items)


def _model_runs(model: dict[str, Any]) -> str:
    """What the model was fitted on: its configuration and the settings of its runs (model.json's record)."""
    settings = model.get("run_settings") if isinstance(model.get("run_settings"), dict) else {}
    facts = [f"config {model['config']}" if model.get("config") else "",
             ", ".join(f"{name}={value}" for name, value in (settings or model.get("settings") or {}).items())]
    return "; ".join(fact for fact in facts if fact)


def _model_row(model: dict[str, Any]) -> list[Any]:
    values = {**model, "function": short_numbers(str(model.get("function") or "")),
              "verdict": verdict(model.get("smape"), model.get("adjusted_r2")),
              "metric": f"{model.get('metric')} ({unit})" if (unit := metric_unit(model.get("metric"))) else
              model.get("metric")}
    return [*(values.get(name) for name in _MODEL), _model_predictions(model) or None, _model_checks(model) or None,
            _model_runs(model) or None, model.get("warnings") or None]


def _point(at: Any) -> str:
    if not isinstance(at, dict):
        return str(at)
    return ", ".join(f"{name}={cell_text(value)}" for name, value in at.items())


def _model_part(found: ModelFile) -> str:
    models = [model for index, model in enumerate(found.content.get("models") or []) if index not in found.invalid]
    rows = [_model_row(model) for model in models]
    sources = found.content.get("sources")
    parts = [heading(found.path.name)]
    if isinstance(sources, list) and sources:
        parts.append(paragraph(f"Fitted on the runs under: {', '.join(map(str, sources))}.", "note"))
    parts += [table([*map(header, _MODEL), "predictions", "left-out checks", "runs", "warnings"], rows),
              left_out_note([found.invalid[index] for index in sorted(found.invalid)], "model{s}", "the table")]
    if (found.path / MODEL_PLOT).is_file():
        parts.append(image(found.path / MODEL_PLOT))
    return "".join(parts)


def models_section(data: ReportData) -> Section:
    title = "Performance models"
    if not data.models:
        return absent("models", title, "No performance model (trainbench model's model.json) in the folders given.")
    note = paragraph("Fitted by Extra-P; numbers in functions to 4 significant digits. SMAPE: symmetric mean "
                     f"absolute percentage error of the fit (%); verdict: {VERDICT_RULE}. values: the measurements it "
                     "stands on; an extrapolated prediction or check lies outside the measured range; a left-out "
                     "check's error is (predicted - measured) / measured.", "note")
    return Section("models", title, note + "".join(map(_model_part, data.models)))
