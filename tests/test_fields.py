"""The registry of result fields (``trainbench.results.fields``): one entry puts a field in every file, table and
merge; a value no entry declares is an error; files of formats 1 and 2 read under today's names."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.standins.engine import StandInEngine
from tests.test_report_html import page_of
from trainbench.bench import sweep, throughput_run
from trainbench.bench.compare import compare_loaded, load_run
from trainbench.bench.ranks import by_rule, merge_ranks
from trainbench.bench.throughput_run import ThroughputRun
from trainbench.bench.worker import Measurement, measure
from trainbench.campaign import table
from trainbench.campaign.table import campaign_table
from trainbench.config import BenchConfig, ModelConfig
from trainbench.engines.base import Engine
from trainbench.render.readable import header
from trainbench.report.sections import throughput as sections
from trainbench.results import fields, layout
from trainbench.results.fields import FLAT, Field, Group, Merge, Where
from trainbench.results.files import write_json_atomic
from trainbench.results.records import FORMAT, BatchResult, RunSummary, Status, is_measured
from trainbench.results.store import read_summary
from trainbench.telemetry.schema import TELEMETRY_VALUES, telemetry_values

# A field the suite does not have, added the way a developer would: one entry (merged by the largest rank's value).
PEAK = Field("host_swap_pages", "", FLAT, Merge.MAX, Group.STATE, "the most swap pages a rank used",
             measured=True)
# summary.csv's value columns as released: the order is append-only, so a column never moves.
RELEASED = ("samples_per_sec", "windows", "samples_per_sec_median", "samples_per_sec_min", "samples_per_sec_max",
            "input_samples_per_sec", "input_bound", "step_time_median_s", "step_time_p10_s", "step_time_p90_s",
            "step_time_mad_s", "window_s", "timed_steps", "warmup_steps", "world_size", "compile_s", "energy_j",
            "joules_per_sample", "samples_per_joule", "mean_power_w", "sampled_power_w", "sm_clock_median_mhz",
            "temperature_max_c", "throttle_power_fraction", "throttle_thermal_fraction", "telemetry_samples",
            "telemetry_note",
            # format 4: what the workload's samples cost, and the GPUs' share of it
            "tokens_per_sec", "parameters", "train_flops_per_sample", "flops_note", "achieved_flops", "peak_flops",
            "mfu", "mfu_note",
            # issue 30: the windows' agreement and the machine's other load (results.trust)
            "window_cv_pct", "window_spread_pct", "other_cpu_cores", "load_average",
            # format 5 (issue 40): how the step ran, and its memory
            "matmul_precision", "optimizer", "attention_kernel", "image_layout", "peak_memory_bytes",
            "peak_memory_kind", "memory_parameters_bytes", "memory_gradients_bytes", "memory_optimizer_bytes",
            "memory_activations_bytes", "optimizer_state_bytes", "memory_note", "host_syncs_per_step",
            # format 6 (issue 41): recomputation and sharding
            "activation_checkpointing", "shard", "parameters_held", "hardware_flops_per_sample", "hfu")


@pytest.fixture
def with_peak(monkeypatch: pytest.MonkeyPatch) -> Field:
    """The registry with PEAK appended (as its one new entry would be)."""
    monkeypatch.setattr(fields, "FIELDS", (*fields.FIELDS, PEAK))
    monkeypatch.setattr(fields, "BY_NAME", {**fields.BY_NAME, PEAK.name: PEAK})
    return PEAK


def nothing() -> StandInEngine:
    """An engine whose step does nothing: the worker's measurement runs for real around it."""
    return StandInEngine("nothing")


def measure_peak(config: BenchConfig, engine: Engine, timeline: Path | None = None) -> Measurement:
    """The worker's measurement and the code that produces the new field's value."""
    done = measure(config, engine, timeline)
    return Measurement(done.result.replace(host_swap_pages=1000 * config.batch_size), done.warmup_s, done.step_s)


# The worker process: trainbench.bench.worker.main measuring with measure_peak, on an engine that does nothing.
WORKER = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})
from tests import test_fields
from trainbench.bench import worker
worker.load_engine = lambda name: test_fields.nothing()
raise SystemExit(worker.main(sys.argv[1:], test_fields.measure_peak))
"""


def configs(*batch_sizes: int) -> list[BenchConfig]:
    model = ModelConfig(framework="torch", precision="fp32", device="cpu")
    return [BenchConfig(model=model, batch_size=batch, warmup_steps=1, steps=3, telemetry_interval_s=0)
            for batch in batch_sizes]


def campaign_run(campaign: Path) -> ThroughputRun:
    """A campaign's finished run folder with its run file; the store the sweep writes into."""
    folder = campaign / "run_0_torch_fp32_ret_0"
    folder.mkdir(parents=True)
    write_json_atomic(folder / layout.CAMPAIGN_RUN, {"run": 0, "repetition": 0, "experiment": 0, "config": "torch_fp32",
                                                "values": {"framework": "torch", "precision": "fp32"}})
    return ThroughputRun(folder, {"framework": "torch", "precision": "fp32", "device": "cpu", "data": "synthetic",
                                  "warmup_steps": 1, "timed_steps": 3})


def assert_everywhere(campaign: Path, run: ThroughputRun, field: Field, expected: dict[int, int],
                      tmp_path: Path) -> None:
    """The field's values in summary.json, summary.csv (its last column), results.csv and the report's table."""
    saved = json.loads((run.path / "summary.json").read_text())
    assert saved["format"] == FORMAT
    assert {row["batch_size"]: row[field.name] for row in saved["results"]} == expected
    with open(run.path / "summary.csv", newline="", encoding="utf-8") as rows:
        written = list(csv.DictReader(rows))
    assert list(written[0])[-2:] == [field.name, "error"]  # appended: every older column keeps its place
    assert {int(row["batch_size"]): int(row[field.name]) for row in written} == expected
    frame = campaign_table(campaign)
    assert list(frame.columns)[-1] == field.name
    assert dict(zip(frame["batch_size"], frame[field.name], strict=True)) == expected
    page, _ = page_of([run.path], tmp_path)
    shown = page.table("throughput", field.name)
    assert {int(row["batch size"]): float(row[header(field.name)]) for row in shown} == expected  # headed in words


@pytest.mark.slow
def test_one_registry_entry_puts_a_field_in_every_file_and_the_report(with_peak: Field, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The real sweep and worker processes: the worker's measurement gains the value, the registry entry does the
    rest."""
    monkeypatch.setattr(sweep, "worker_command", lambda config, module: [sys.executable, "-c", WORKER])
    run = campaign_run(tmp_path / "campaign")
    said: list[str] = []
    sweep.run_sweep(configs(2, 4), run, said.append)
    assert [row["status"] for row in run.rows()] == ["ok", "ok"], said
    assert_everywhere(tmp_path / "campaign", run, with_peak, {2: 2000, 4: 4000}, tmp_path)


def test_one_registry_entry_reaches_every_file_the_report_and_the_rank_merge(with_peak: Field,
                                                                            tmp_path: Path) -> None:
    """The same in this process (the worker's measurement called directly), and ranks merged by the entry's rule."""
    run = campaign_run(tmp_path / "campaign")
    for config in configs(2, 4):
        done = measure_peak(config, nothing())  # type: ignore[arg-type]
        run.add(BatchResult.from_row(json.loads(json.dumps(done.result.to_row()))), done.warmup_s, done.step_s)
    assert_everywhere(tmp_path / "campaign", run, with_peak, {2: 2000, 4: 4000}, tmp_path)
    lead, other = run.results[0], run.results[0].replace(host_swap_pages=7000)
    merged = merge_ranks([(0, lead), (1, other)], world_size=2)
    assert merged.values[with_peak.name] == 7000  # Merge.MAX: the largest rank's
    assert merged.values["samples_per_sec"] == pytest.approx(2 * lead.values["samples_per_sec"])


def test_a_value_no_field_declares_is_an_error_naming_it(tmp_path: Path) -> None:
    run = ThroughputRun(tmp_path, {"framework": "torch"})
    done = measure_peak(configs(2)[0], nothing())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="host_swap_pages is no result field"):
        run.add(done.result)
    with pytest.raises(ValueError, match="host_swap_pages is no result field"):
        merge_ranks([(0, done.result), (1, done.result)], world_size=2)
    assert json.loads((tmp_path / "summary.json").read_text())["results"] == []  # nothing half-recorded


@pytest.mark.parametrize(("rule", "values", "merged"), [
    (Merge.LEAD, [3, 1, None], 3),
    (Merge.SUM, [3, 1, 2], 6),
    (Merge.SUM, [3, None, 2], None),  # a rank without it: the sum is unknown
    (Merge.MAX, [3, None, 5], 5),
    (Merge.MIN, [3, None, 5], 3),
    (Merge.MEDIAN, [9, 1, 5, None], 5),
    (Merge.MAX, [None, None], None),
    (Merge.JOIN, ["b", None, "a", "b"], "a; b"),
    (Merge.CONCAT, [[1], None, [2, 3]], [1, 2, 3]),
])
def test_each_merge_rule(rule: Merge, values: list[Any], merged: Any) -> None:
    assert by_rule(rule, values) == merged


def test_world_values_are_computed_from_every_rank() -> None:
    with pytest.raises(ValueError, match="whole world"):
        by_rule(Merge.WORLD, [1, 2])


def test_every_field_a_worker_writes_is_merged_by_its_rule() -> None:
    """Two ranks with every summary field: each merged value follows its field's rule, none left as rank 0's by
    accident (the old ``**lead.values``)."""
    names = fields.written_to(Where.SUMMARY_JSON)
    base = {name: None for name in names} | {"window_samples_per_sec": [10.0, 12.0], "window_s": 1.0,
                                             "timed_steps": 5, "samples_per_sec": 11.0, "step_time_median_s": 0.1}
    first = BatchResult(2, Status.OK, None, base | {"energy_j": 5.0, "temperature_max_c": 60, "windows": 2,
                                                     "telemetry_note": "x", "gpu_telemetry": [{"index": 0}],
                                                     "other_cpu_cores": 0.25, "load_average": 4.0})
    second = BatchResult(2, Status.OK, None, base | {"energy_j": 7.0, "temperature_max_c": 80, "windows": 3,
                                                      "window_s": 2.0, "gpu_telemetry": [{"index": 1}],
                                                      "other_cpu_cores": 1.5})
    merged = merge_ranks([(0, first), (1, second)], world_size=2).values
    assert set(merged) == set(names)
    assert merged["energy_j"] == 12.0 and merged["temperature_max_c"] == 80 and merged["windows"] == 2
    assert merged["window_s"] == 2.0 and merged["telemetry_note"] == "x"
    assert merged["gpu_telemetry"] == [{"index": 0}, {"index": 1}]
    assert merged["joules_per_sample"] == pytest.approx(12.0 / (2 * 2 * 5))
    assert (merged["other_cpu_cores"], merged["load_average"]) == (1.5, 4.0)  # the busiest rank's machine
    assert merged["window_spread_pct"] == pytest.approx(100 * (24 - 20) / 22)  # the world's windows: 20, 24


def test_the_lists_derive_from_the_registry_in_its_order() -> None:
    assert throughput_run.MEASURED_FIELDS == RELEASED  # summary.csv's columns: the released ones, in place
    assert set(TELEMETRY_VALUES) == {f.name for f in fields.FIELDS if f.group in (Group.ENERGY, Group.TELEMETRY)
                                     and f.written_to(Where.SUMMARY_CSV)}
    assert table.COLUMNS[len(table.RUN_COLUMNS):] == fields.written_to(Where.RESULTS_CSV)
    assert set(sections.throughput_columns()) | set(telemetry_values()) >= set(RELEASED)
    assert all(f.unit for f in fields.FIELDS if f.measured)
    assert is_measured("samples_per_sec") and not is_measured("timed_steps")
    assert is_measured("gpu_time_s_median")  # a profiler's value no entry declares: judged by its name


def _old_run(folder: Path, version: int | None, rate: float) -> Path:
    """A throughput run as trainbench wrote it in format 1 (no version) or 2: rates and energy named after images."""
    folder.mkdir(parents=True)
    row = {"batch_size": 8, "status": "ok", "images_per_sec": rate, "images_per_sec_median": rate,
           "images_per_sec_min": rate - 1, "images_per_sec_max": rate + 1,
           "window_images_per_sec": [rate - 1, rate, rate + 1], "input_images_per_sec": 2 * rate,
           "input_bound": False, "joules_per_image": 0.5, "images_per_joule": 2.0, "timed_steps": 9,
           "ranks": [{"rank": 0, "images_per_sec": rate / 2}], "gpu_telemetry": [{"joules_per_image": 0.5}],
           "error": None}
    data = {"framework": "torch", "precision": "fp32", "results": [row]}
    (folder / "summary.json").write_text(json.dumps(data if version is None else {"format": version, **data}))
    (folder / "steps.csv").write_text("batch_size,phase,step,seconds\n8,timed,0,0.1\n8,timed,1,0.1\n")
    return folder


@pytest.mark.parametrize("version", [None, 2])
def test_a_format_1_or_2_run_reads_with_the_new_names(tmp_path: Path, version: int | None) -> None:
    summary = read_summary(_old_run(tmp_path / "old", version, 100.0) / "summary.json")
    [result] = summary.results
    assert summary.format == (version or 1) and result.ok
    assert result.values["samples_per_sec"] == 100.0 and result.values["window_samples_per_sec"] == [99, 100, 101]
    assert result.values["input_samples_per_sec"] == 200.0 and result.values["samples_per_sec_min"] == 99.0
    assert result.values["joules_per_sample"] == 0.5 and result.values["samples_per_joule"] == 2.0
    assert result.values["ranks"] == [{"rank": 0, "samples_per_sec": 50.0}]
    assert result.values["gpu_telemetry"] == [{"joules_per_sample": 0.5}]
    assert not fields.unknown(result.values)
    assert RunSummary.from_json({"format": FORMAT, "results": [{"batch_size": 1, "status": "ok",
                                                                "images_per_sec": 1.0}]}).results[0].values == \
        {"images_per_sec": 1.0}  # a format-3 row is taken as written


def test_an_old_run_compares_with_a_new_one(tmp_path: Path) -> None:
    old = load_run(_old_run(tmp_path / "old", 2, 100.0))
    new = load_run(_old_run(tmp_path / "new", None, 110.0))
    [row] = compare_loaded(old, new).to_dict("records")
    assert row["samples_per_sec_a"] == 100.0 and row["samples_per_sec_b"] == 110.0
    assert row["change_pct"] == pytest.approx(10.0)


def test_an_old_run_s_invalid_rate_is_named_by_its_new_name(tmp_path: Path) -> None:
    folder = _old_run(tmp_path / "old", 2, 100.0)
    data = json.loads((folder / "summary.json").read_text())
    data["results"][0]["images_per_sec"] = -1
    (folder / "summary.json").write_text(json.dumps(data))
    [result] = read_summary(folder / "summary.json").results
    assert result.status is Status.INVALID and "samples_per_sec is -1" in str(result.error)


def test_a_performance_model_s_metric_keeps_its_old_name_on_the_command_line() -> None:
    from trainbench.analysis.measurements import METRIC_ALIASES, METRICS
    from trainbench.cli.model_cmd import _choices

    assert list(METRICS) == ["step_time", "samples_per_sec", "joules_per_sample", "mean_power_w", "tokens_per_sec",
                             "achieved_flops", "mfu", "gpu_time"]
    parse = _choices(tuple(METRICS), "metric", METRIC_ALIASES)
    assert parse("step_time,images_per_sec,joules_per_image") == ("step_time", "samples_per_sec", "joules_per_sample")
