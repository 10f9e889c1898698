"""``trainbench throughput --max-batch [--memory-limit BYTES]``: the search over a stand-in try function (doubling,
then bisection; OOM a finding, an error the end; a first try that does not fit), the limit's parsing, the run's files
with a stand-in worker, and one real search of tiny GPT-2 on the CPU."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import assert_one_line_error, run_main
from trainbench.bench import max_batch, sweep
from trainbench.bench.max_batch import MaxBatchSearch, parse_bytes, search
from trainbench.config import BenchConfig, ModelConfig
from trainbench.results.layout import MAX_BATCH
from trainbench.results.records import BatchResult, Status

MiB = 2**20


def measured(batch: int, peak: int | None) -> BatchResult:
    values: dict[str, Any] = {"samples_per_sec": 10.0 * batch}
    if peak is not None:
        values["peak_memory_bytes"] = peak
    return BatchResult(batch, Status.OK, None, values)


def linear(per_sample: int = 100, oom_from: int | None = None) -> Callable[[int], BatchResult]:
    """A stand-in worker: peak memory ``per_sample`` bytes a sample; out of memory from ``oom_from`` on."""

    def try_batch(batch: int) -> BatchResult:
        if oom_from is not None and batch >= oom_from:
            return BatchResult.failed(batch, Status.OOM, "CUDA out of memory. Tried to allocate 2.00 GiB")
        return measured(batch, per_sample * batch)

    return try_batch


def sizes(state: MaxBatchSearch) -> list[int]:
    return [t.batch_size for t in state.tries]


def test_doubles_until_a_size_does_not_fit_then_bisects_to_a_gap_of_one() -> None:
    state = search(linear(per_sample=100), start=1, limit=1250)  # 12 samples fit, 13 do not
    assert sizes(state) == [1, 2, 4, 8, 16, 12, 14, 13]
    assert [t.fits for t in state.tries] == [True, True, True, True, False, True, False, False]
    assert state.complete and state.stopped is None
    verdict = state.to_json()
    assert verdict["largest_fit"] == {"batch_size": 12, "samples_per_sec": 120.0, "peak_memory_bytes": 1200,
                                      "peak_memory_kind": None}
    assert verdict["first_no_fit"] == {"batch_size": 13, "why": "over the limit", "peak_memory_bytes": 1300,
                                       "error": None}
    assert verdict["tries"][4] == {"batch_size": 16, "fits": False, "status": "ok", "peak_memory_bytes": 1600,
                                   "why": "over the limit"}


def test_out_of_memory_is_a_size_that_does_not_fit_and_the_search_goes_on() -> None:
    state = search(linear(per_sample=MiB, oom_from=11), start=3)  # no limit: fits = ran
    assert sizes(state) == [3, 6, 12, 9, 10, 11]
    assert (state.largest_fit.batch_size, state.first_no_fit.batch_size) == (10, 11)
    assert [t.why for t in state.tries if not t.fits] == ["oom", "oom"]
    assert state.complete
    assert state.summary_line() == "largest batch that fits: 10 (100.00 samples/s, peak 10.0 MiB); 11 does not (oom)"


def test_the_summary_line_gives_the_peak_within_the_limit() -> None:
    state = search(linear(per_sample=MiB), start=4, limit=6 * MiB)
    assert state.summary_line("sequence") == ("largest batch that fits: 6 (60.00 sequences/s, peak 6.0 MiB within "
                                              "6.0 MiB); 7 does not (peak 7.0 MiB over 6.0 MiB)")


@pytest.mark.parametrize("status", [Status.ERROR, Status.DIVERGED])
def test_an_error_or_a_divergence_stops_the_search_and_keeps_what_was_found(status: Status) -> None:
    def try_batch(batch: int) -> BatchResult:
        return BatchResult.failed(batch, status, "worker exited with status 1") if batch == 8 else measured(batch, 1)

    state = search(try_batch, start=1, limit=100)
    assert sizes(state) == [1, 2, 4, 8]
    assert not state.complete and state.next_size() is None
    assert state.largest_fit.batch_size == 4 and state.first_no_fit is None
    assert state.to_json()["stopped"] == f"batch size 8: {status.value}: worker exited with status 1"
    line = state.summary_line()
    assert line.startswith("largest batch that fits: 4 (40.00 samples/s, peak 0.0 MiB within 0.0 MiB)")
    assert line.endswith(f"; the search stopped at batch size 8: {status.value}: worker exited with status 1 (not a "
                         "memory verdict)")
    assert "\n" not in line


def test_an_ok_result_without_a_peak_cannot_be_judged_against_a_limit() -> None:
    state = search(lambda batch: measured(batch, None), start=2, limit=10**9)
    assert sizes(state) == [2] and state.largest_fit is None and not state.complete
    assert state.summary_line() == ("no batch size found that fits; the search stopped at batch size 2: measured no "
                                    "peak_memory_bytes to judge against the memory limit (not a memory verdict)")


def test_a_first_try_that_does_not_fit_bisects_below_it() -> None:
    state = search(linear(per_sample=100), start=64, limit=2050)  # 20 fit, 21 do not
    assert sizes(state) == [64, 32, 16, 24, 20, 22, 21]
    assert (state.largest_fit.batch_size, state.first_no_fit.batch_size) == (20, 21)


def test_nothing_fits_when_batch_size_1_does_not() -> None:
    state = search(linear(per_sample=100), start=4, limit=50)
    assert sizes(state) == [4, 2, 1] and state.complete
    assert state.to_json()["largest_fit"] is None and state.first_no_fit.batch_size == 1
    assert state.summary_line() == "no batch size fits: batch size 1 does not (peak 0.0 MiB over 0.0 MiB)"


def test_the_cap_ends_the_doubling() -> None:
    state = search(linear(), start=3, cap=20)
    assert sizes(state) == [3, 6, 12, 20] and state.complete and state.to_json()["capped"]
    assert state.summary_line().endswith("; 20 is the largest batch size trainbench tries")


def test_a_result_for_another_size_than_asked_is_refused() -> None:
    state = MaxBatchSearch(start=4)
    with pytest.raises(ValueError, match="batch size 5, the search asked for 4"):
        state.record(measured(5, 1))


@given(start=st.integers(1, 300), cap=st.integers(300, 1000), verdicts=st.lists(st.booleans(), min_size=1))
def test_whatever_the_tries_say_the_largest_fit_and_the_next_size_tried_above_it_are_one_apart(
        start: int, cap: int, verdicts: list[bool]) -> None:
    """Memory need not grow with the batch (a peak measured on a noisy machine): whatever each try says, the search
    ends with B fitting and B + 1 tried and not fitting (or nothing fitting down to 1, or the cap), never tries a
    size twice, and needs no more tries than doubling and bisection allow."""
    answers = iter(verdicts * 64)
    state = search(lambda batch: measured(batch, 1 if next(answers) else 3), start, limit=2, cap=cap)
    tried = sizes(state)
    assert len(tried) == len(set(tried)) and all(1 <= size <= cap for size in tried)
    assert state.complete
    fit, miss = state.largest_fit, state.first_no_fit
    assert all(t.batch_size <= fit.batch_size for t in state.tries if t.fits) if fit else True
    if fit is None:
        assert miss.batch_size == 1
    elif miss is None:
        assert fit.batch_size == cap
    else:
        assert miss.batch_size == fit.batch_size + 1 and fit.peak <= 2 < miss.peak
    assert len(tried) <= 2 * cap.bit_length() + 2


def test_ctrl_c_in_a_try_is_recorded_and_raised_on() -> None:
    seen: list[list[int]] = []

    def try_batch(batch: int) -> BatchResult:
        if batch == 8:
            raise KeyboardInterrupt
        return measured(batch, 1)

    with pytest.raises(KeyboardInterrupt):
        search(try_batch, start=2, after_try=lambda state: seen.append(sizes(state)))
    assert seen == [[2], [2, 4], [2, 4, 8]]  # the interrupted try shown too: the verdict file is written with it


@pytest.mark.parametrize(("text", "expected"), [
    ("1073741824", 2**30), ("24GiB", 24 * 2**30), ("24Gi", 24 * 2**30), ("512MiB", 512 * 2**20),
    ("512mib", 512 * 2**20), ("2G", 2 * 10**9), ("2GB", 2 * 10**9), ("1.5GiB", 3 * 2**29), ("64k", 64_000),
    ("3 TiB", 3 * 2**40), ("1", 1),
])
def test_a_memory_limit_is_bytes_plain_or_with_a_unit(text: str, expected: int) -> None:
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "GiB", "1.5", "-2GiB", "0", "24 GiBs", "1e9", "nanGi", "infGiB", "2Xi", "10ib",
                                  "0.1", "99999999TiB"])
def test_a_memory_limit_that_is_no_number_of_bytes_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="is not"):
        parse_bytes(text)


def test_a_bad_memory_limit_is_one_line_naming_the_option() -> None:
    result = run_main("throughput", "--max-batch", "--memory-limit", "24 gigs", "--device", "cpu")
    assert_one_line_error(result, "--memory-limit", "'24 gigs' is not a number of bytes")


def test_a_memory_limit_without_the_search_is_refused(tmp_path: Path) -> None:
    result = run_main("throughput", "--memory-limit", "1GiB", "--device", "cpu", "--output", str(tmp_path))
    assert_one_line_error(result, "--memory-limit", "--max-batch")
    assert list(tmp_path.iterdir()) == []


# --- the run: every try a worker process; here a few lines of Python that answer as a real worker would -----------

# argv: CONFIG_JSON RESULT_JSON [TIMELINE_CSV], as the real worker. Peak 1 MiB a sample; out of memory from 24 on.
FAKE_WORKER = """
import json, sys
config_path, result_path = sys.argv[1:3]
batch = json.load(open(config_path))["batch_size"]
if batch >= 24:
    row = {"batch_size": batch, "status": "oom", "error": "CUDA out of memory. Tried to allocate 1.00 GiB"}
else:
    row = {"batch_size": batch, "status": "ok", "samples_per_sec": 10.0 * batch, "window_s": 0.3, "timed_steps": 3,
           "warmup_steps": 1, "peak_memory_bytes": batch * 2**20, "peak_memory_kind": "stand-in"}
json.dump({"result": row, "warmup_s": [0.5], "step_s": [0.1] * 3, "versions": {"torch": "x"}, "rank": None},
          open(result_path, "w"))
"""


@pytest.fixture
def fake_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep, "worker_command", lambda config, module: [sys.executable, "-I", "-c", FAKE_WORKER])


CONFIG = BenchConfig(model=ModelConfig(framework="torch", precision="fp32", device="cpu", workload="gpt2",
                                       size="tiny"), batch_size=4, warmup_steps=1, steps=3, telemetry_interval_s=0)


def test_the_run_records_every_try_and_the_verdict(tmp_path: Path, fake_worker: None) -> None:
    said: list[str] = []
    store, state = max_batch.measure_max_batch(CONFIG, tmp_path, 10 * MiB, said.append)
    assert state.complete and store.path.parent == tmp_path
    verdict = json.loads((store.path / MAX_BATCH).read_text())
    summary = json.loads((store.path / "summary.json").read_text())
    assert verdict["format"] >= 5 and verdict["memory_limit_bytes"] == 10 * MiB and verdict["complete"]
    assert [(t["batch_size"], t["fits"], t["why"]) for t in verdict["tries"]] == [
        (4, True, None), (8, True, None), (16, False, "over the limit"), (12, False, "over the limit"),
        (10, True, None), (11, False, "over the limit")]
    assert (verdict["largest_fit"]["batch_size"], verdict["first_no_fit"]["batch_size"]) == (10, 11)
    # Every try is an ordinary batch result, those over the limit with their measurement.
    rows = {row["batch_size"]: row for row in summary["results"]}
    assert [row["batch_size"] for row in summary["results"]] == [4, 8, 16, 12, 10, 11]
    assert rows[16]["status"] == "ok" and rows[16]["samples_per_sec"] == 160.0
    assert json.loads((store.path / "env.json").read_text())["framework"] == {"torch": "x"}
    assert said[-1] == ("largest batch that fits: 10 (100.00 sequences/s, peak 10.0 MiB within 10.0 MiB); 11 does "
                        "not (peak 11.0 MiB over 10.0 MiB)")
    assert "batch size 16: 160.00 sequences/s: does not fit (peak 16.0 MiB over 10.0 MiB)" in said


def test_the_run_without_a_limit_goes_on_past_out_of_memory(tmp_path: Path, fake_worker: None) -> None:
    store, _ = max_batch.measure_max_batch(CONFIG, tmp_path, None, lambda line: None)
    verdict = json.loads((store.path / MAX_BATCH).read_text())
    assert [t["batch_size"] for t in verdict["tries"]] == [4, 8, 16, 32, 24, 20, 22, 23]
    assert verdict["first_no_fit"] == {"batch_size": 24, "why": "oom", "peak_memory_bytes": None,
                                       "error": "CUDA out of memory. Tried to allocate 1.00 GiB"}
    assert verdict["largest_fit"]["batch_size"] == 23 and verdict["memory_limit_bytes"] is None


def test_ctrl_c_leaves_every_try_and_the_partial_verdict(tmp_path: Path, fake_worker: None,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    real = sweep.run_worker

    def interrupted_at_16(config: BenchConfig, run: Any, *args: Any, **kwargs: Any) -> sweep.WorkerOutcome:
        if config.batch_size == 16:  # as run_worker meets a Ctrl-C: the batch size recorded, then raised on
            run.add(BatchResult.failed(16, Status.INTERRUPTED, "interrupted by the user"))
            raise KeyboardInterrupt
        return real(config, run, *args, **kwargs)

    monkeypatch.setattr(max_batch, "run_worker", interrupted_at_16)
    with pytest.raises(KeyboardInterrupt):
        max_batch.measure_max_batch(CONFIG, tmp_path, 10 * MiB, lambda line: None)
    (run_dir,) = tmp_path.iterdir()
    verdict = json.loads((run_dir / MAX_BATCH).read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [(r["batch_size"], r["status"]) for r in summary["results"]] == [(4, "ok"), (8, "ok"), (16, "interrupted")]
    assert [(t["batch_size"], t["fits"]) for t in verdict["tries"]] == [(4, True), (8, True), (16, None)]
    assert not verdict["complete"] and verdict["largest_fit"]["batch_size"] == 8
    assert verdict["stopped"] == "batch size 16: interrupted: interrupted by the user"


# --- the real search: tiny GPT-2 on the CPU, the peak the worker's resident set over the timed windows -----------

GPT2 = ["--workload", "gpt2", "--size", "tiny", "--device", "cpu", "--seq-len", "64", "--warmup", "1", "--steps", "2",
        "--telemetry-interval", "0"]


def peaks(run_dir: Path) -> dict[int, dict[str, Any]]:
    summary = json.loads((run_dir / "summary.json").read_text())
    return {row["batch_size"]: row for row in summary["results"]}


@pytest.mark.slow
def test_the_search_finds_a_batch_within_the_limit_and_the_next_size_tried_over_it(tmp_path: Path) -> None:
    """The limit sits between batch 2's peak, measured first (about 2 MiB a sequence of 64 tokens on top of some
    780 MiB of resident set), and batch 4's: from 2 the search tries 2, 4 and 3 (four workers in all). Run to run the
    peak moves by about 1 MiB; whichever way it moves, the verdict must hold (batch 2 over the limit: the search tries
    1; batch 4 within it: the search doubles on)."""
    calibration = run_main("throughput", *GPT2, "--batch-sizes", "2", "--output", str(tmp_path / "calibration"))
    assert calibration.returncode == 0, calibration.stdout + calibration.stderr
    (row,) = peaks(Path(calibration.stdout.strip().splitlines()[-1])).values()
    assert row["peak_memory_kind"] == "the worker's peak resident set (VmHWM) over the timed windows"
    limit = row["peak_memory_bytes"] + 3 * MiB // 2

    result = run_main("throughput", *GPT2, "--max-batch", "--memory-limit", str(limit), "--batch-sizes", "2",
                     "--output", str(tmp_path / "search"))
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    verdict = json.loads((run_dir / MAX_BATCH).read_text())
    rows = peaks(run_dir)
    assert verdict["complete"] and verdict["memory_limit_bytes"] == limit and verdict["stopped"] is None
    assert [t["batch_size"] for t in verdict["tries"]] == list(rows)  # every try is a batch result, in order
    best, above = verdict["largest_fit"]["batch_size"], verdict["first_no_fit"]["batch_size"]
    assert above == best + 1
    assert rows[best]["status"] == "ok" and rows[best]["peak_memory_bytes"] <= limit
    assert rows[above]["status"] == "oom" or rows[above]["peak_memory_bytes"] > limit
    assert verdict["largest_fit"]["samples_per_sec"] == rows[best]["samples_per_sec"] > 0
    assert all(t["fits"] == (rows[t["batch_size"]]["peak_memory_bytes"] <= limit) for t in verdict["tries"])
    assert result.stdout.strip().splitlines()[-3].startswith(f"largest batch that fits: {best} (")
