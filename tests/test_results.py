"""The results model: typed, versioned records; the files of older versions still read; one OOM classifier."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from trainbench.bench.compare import load_run
from trainbench.bench.sweep import death_result
from trainbench.errors import UsageError
from trainbench.profile.run import ProfileRun
from trainbench.results.failure import OOM_MARKERS, failure_status, is_out_of_memory, one_line, says_out_of_memory
from trainbench.results.files import write_json_atomic
from trainbench.results.layout import batch_file, in_unfinished_run, worker_file
from trainbench.results.records import FORMAT, BatchResult, RecordError, RunSummary, Status, format_of
from trainbench.results.store import read_summary

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


def test_a_result_round_trips_through_its_row() -> None:
    result = BatchResult(8, Status.OK, None, {"samples_per_sec": 12.5, "window_samples_per_sec": [12.0, 13.0]})
    row = result.to_row()
    assert row == {"batch_size": 8, "status": "ok", "samples_per_sec": 12.5, "window_samples_per_sec": [12.0, 13.0],
                   "error": None}
    assert BatchResult.from_row(json.loads(json.dumps(row))) == result
    assert result.ok and result.get("samples_per_sec") == 12.5 and result.get("absent", "x") == "x"


def test_a_failure_has_one_constructor_and_no_measurement() -> None:
    failed = BatchResult.failed(64, Status.OOM, "out of memory")
    assert (failed.ok, failed.status, failed.values, failed.to_row()["status"]) == (False, Status.OOM, {}, "oom")
    with pytest.raises(ValueError, match="failure status"):
        BatchResult.failed(64, Status.OK, "fine")


def test_replace_adds_values_and_keeps_what_is_not_replaced() -> None:
    measured = BatchResult(4, Status.OK, None, {"profiler": "ncu"})
    analysed = measured.replace(kernels=12)
    assert analysed.values == {"profiler": "ncu", "kernels": 12} and analysed.status is Status.OK
    refused = analysed.replace(status=Status.ERROR, error="no permission")
    assert (refused.status, refused.error, refused.values["kernels"]) == (Status.ERROR, "no permission", 12)


@pytest.mark.parametrize(("row", "problem"), [
    ([4], "r is not an object"),
    ({"batch_size": True, "status": "ok"}, "r.batch_size is True"),
    ({"batch_size": 0, "status": "ok"}, "r.batch_size is 0"),
    ({"batch_size": 4, "status": "timeout"}, "r.status is 'timeout', not one of ok, oom, error, interrupted"),
    ({"batch_size": 4, "status": "oom", "error": 7}, "r.error is 7"),
])
def test_a_malformed_row_names_its_field(row: object, problem: str) -> None:
    with pytest.raises(RecordError, match=problem.replace(".", r"\.")):
        BatchResult.from_row(row, "r")


def test_summaries_carry_the_format_version_and_refuse_a_newer_one() -> None:
    summary = RunSummary({"framework": "tf"}, [BatchResult.failed(2, Status.ERROR, "boom")])
    data = summary.to_json()
    assert next(iter(data)) == "format" and data["format"] == FORMAT
    assert RunSummary.from_json(data) == summary
    assert format_of({"results": []}) == 1  # written before versions existed
    with pytest.raises(RecordError, match=f"format {FORMAT + 1} is newer"):
        RunSummary.from_json({**data, "format": FORMAT + 1})
    with pytest.raises(RecordError, match="format is 'two'"):
        format_of({"format": "two"})


def test_every_json_object_written_is_stamped_and_atomic(tmp_path: Path) -> None:
    path = tmp_path / "env.json"
    write_json_atomic(path, {"format": 1, "python": "3.11"})
    assert json.loads(path.read_text()) == {"format": FORMAT, "python": "3.11"}
    write_json_atomic(path, [1, 2])  # not an object: nothing to stamp
    assert json.loads(path.read_text()) == [1, 2]
    assert [p.name for p in tmp_path.iterdir()] == ["env.json"]


def test_batch_files_are_named_in_one_place(tmp_path: Path) -> None:
    assert batch_file(tmp_path, 16, ".nsys-rep") == tmp_path / "batch_16.nsys-rep"
    assert batch_file(tmp_path, 16) == tmp_path / "batch_16"
    assert worker_file(tmp_path, 16, ".log") == tmp_path / "logs" / "batch_16.log"


def test_kept_format_1_throughput_runs_still_read() -> None:
    run_dir = RESULTS / "h100_torch" / "throughput_torch_fp32_cuda"
    assert "format" not in json.loads((run_dir / "summary.json").read_text())
    run = load_run(run_dir)
    assert run.header["framework"] == "torch" and "format" not in run.header
    ok = [r for r in run.results.values() if r.ok]
    assert ok and all(r.values["samples_per_sec"] > 0 for r in ok)


def test_kept_format_1_profile_runs_read_with_the_renamed_field() -> None:
    path = RESULTS / "h100_profile" / "nsys_profile.json"
    old = json.loads(path.read_text())["results"][0]
    summary = read_summary(path)
    assert summary.format == 1 and summary.header["profiler"] == "nsys"
    [result] = summary.results
    assert result.status is Status.ERROR and "window_samples_per_sec" not in result.values
    assert result.values["profiled_samples_per_sec"] == old["window_images_per_sec"]


def test_a_profile_store_writes_what_read_summary_reads_back(tmp_path: Path) -> None:
    store = ProfileRun(tmp_path, {"profiler": "ncu"}, ("kernels",))
    store.add(BatchResult(4, Status.OK, None, {"profiler": "ncu", "profiled_iterations": [1]}))
    store.replace_last(store.last.replace(kernels=30))
    summary = read_summary(tmp_path / "profile.json")
    assert summary.format == FORMAT and summary.results == store.results
    assert (tmp_path / "summary.csv").read_text().splitlines() == [
        "batch_size,status,kernels,profiled_iterations,error", "4,ok,30,[1],"]


def test_read_summary_names_the_file_and_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    path.write_text('{"results": [{"batch_size": 4, "status": "maybe"}]}')
    with pytest.raises(UsageError, match=r"summary\.json: not a run's summary: results\[0\]\.status is 'maybe'"):
        read_summary(path)
    path.write_text("{")
    with pytest.raises(UsageError, match=r"summary\.json: not a run's file \(JSONDecodeError"):
        read_summary(path)


# --- the one out-of-memory classifier ---------------------------------------------------------------------------


class OutOfMemoryError(RuntimeError):
    """Named like torch's: the classifier recognises classes by name, without importing a framework."""


@pytest.mark.parametrize("error", [
    MemoryError(),
    OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
    RuntimeError("CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate(handle)"),
    RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory"),
    RuntimeError("OOM when allocating tensor with shape[4096,3,224,224]"),
    RuntimeError("Failed to allocate 12.0GiB of scratch space"),
])
def test_allocation_failures_are_oom(error: BaseException) -> None:
    assert is_out_of_memory(error) and failure_status(error) is Status.OOM


def test_the_cause_chain_is_walked_and_other_errors_are_not_oom() -> None:
    try:
        try:
            raise MemoryError
        except MemoryError as inner:
            raise RuntimeError("step failed") from inner
    except RuntimeError as wrapped:
        assert is_out_of_memory(wrapped)
    try:
        try:
            raise OutOfMemoryError("CUDA out of memory")
        except OutOfMemoryError:
            raise ValueError("while handling it") from None  # an explicitly suppressed context still counts
    except ValueError as suppressed:
        assert is_out_of_memory(suppressed)
    assert not is_out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"))
    assert failure_status(ValueError("batch size must be positive")) is Status.ERROR
    assert not is_out_of_memory(KeyboardInterrupt())


def test_a_dead_worker_is_classified_by_the_same_markers() -> None:
    for marker in OOM_MARKERS:
        log = f"Traceback (most recent call last):\n  ...\nRuntimeError: {marker} in the backward pass\n"
        assert says_out_of_memory(log), marker
        assert death_result(8, -signal.SIGKILL, log).status is Status.OOM
    died = death_result(8, -signal.SIGSEGV, "step 3\nSegmentation fault\n")
    assert (died.status, died.error) == (Status.ERROR, "worker killed by SIGSEGV (Segmentation fault)")


def test_one_line_keeps_the_type_and_the_first_line() -> None:
    assert one_line(RuntimeError("\n  CUDA out of memory.\nTried to allocate")) == "RuntimeError: CUDA out of memory."
    assert one_line(MemoryError()) == "MemoryError"
    assert len(one_line(ValueError("x" * 1000))) == 300


@pytest.mark.parametrize(("field", "value"), [
    ("samples_per_sec", float("nan")), ("samples_per_sec", float("inf")), ("samples_per_sec", -3.0),
    ("samples_per_sec", "fast"), ("samples_per_sec", True), ("window_s", -0.1), ("step_time_median_s", "0.1"),
    ("window_samples_per_sec", [10.0, float("nan")]), ("window_samples_per_sec", [10.0, None]),
    ("energy_j", -1), ("mean_power_w", float("-inf")), ("joules_per_sample", {"j": 1}), ("sm_clock_median_mhz", "x"),
])
def test_an_ok_result_with_no_measurement_in_a_rate_or_time_is_invalid(tmp_path: Path, field: str,
                                                                       value: object) -> None:
    rows = [{"batch_size": 4, "status": "ok", "samples_per_sec": 40.0, "window_s": 0.5, field: value},
            {"batch_size": 8, "status": "ok", "samples_per_sec": 41.0, "window_s": 0.5}]
    (tmp_path / "summary.json").write_text(json.dumps({"format": 2, "results": rows}))
    summary = read_summary(tmp_path / "summary.json")
    bad, good = summary.results
    assert (bad.status, good.status) == (Status.INVALID, Status.OK)
    where = tmp_path / "summary.json"
    assert bad.error == f"{where}: results[0].{field} is {value!r}, not a finite non-negative number"
    assert summary.ok_results() == [good] and summary.invalid_results() == [bad]


def test_absent_values_zero_and_failures_stay_as_they_were(tmp_path: Path) -> None:
    rows = [{"batch_size": 4, "status": "ok", "samples_per_sec": 0, "input_samples_per_sec": None, "window_s": 0.0,
             "temperature_max_c": -5, "profiler": "ncu"},
            {"batch_size": 8, "status": "oom", "samples_per_sec": float("nan"), "error": "out of memory"}]
    summary = RunSummary.from_json({"results": rows})
    assert [r.status for r in summary.results] == [Status.OK, Status.OOM]
    assert summary.results[1].error == "out of memory"


@pytest.mark.parametrize(("relative", "unfinished"), [
    ("run_0_torch_inprogress/summary.json", True), ("run_3_x_abandoned-2/logs/summary.json", True),
    ("c/run_1_tf_refused/profiled_data_ncu/profile.json", True), ("run_0_torch_ret_0/summary.json", False),
    ("run_0_data-imgs_inprogress-ab12_ret_0/summary.json", False), ("my_inprogress/summary.json", False),
    ("run_0_x_abandoned-/summary.json", False), ("run_0_torch_inprogress", False),
])
def test_unfinished_campaign_runs_are_told_by_the_folder_name_alone(relative: str, unfinished: bool) -> None:
    assert in_unfinished_run(Path("/c") / relative, Path("/c")) is unfinished


def test_a_rates_spread_over_windows_is_checked_as_the_rate_is() -> None:
    rows = [{"batch_size": 4, "status": "ok", "samples_per_sec": 40.0, "samples_per_sec_max": "fast"},
            {"batch_size": 8, "status": "ok", "samples_per_sec": 40.0, "samples_per_sec_min": 39.0,
             "temperature_max_c": -2, "windows_median": -1}]
    first, second = RunSummary.from_json({"results": rows}).results
    assert first.status is Status.INVALID and "samples_per_sec_max" in str(first.error)
    assert second.status is Status.OK
