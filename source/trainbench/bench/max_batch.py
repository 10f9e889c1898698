"""``trainbench throughput --max-batch``: the largest batch size that fits, found by trying sizes one worker each.

The search doubles the batch size from its start until a try does not fit, then bisects between the largest size
that fitted and the smallest that did not, down to a gap of 1; when the very first try does not fit, it bisects
below it towards 1. A try *does not fit* when its worker ran out of memory (``oom``: a finding, never fatal) or,
with a memory limit, when it measured a ``peak_memory_bytes`` above the limit (its measurement is kept: it ran).
An error, a divergence, an interruption or an ok result without a peak to judge against the limit is no memory
verdict: the search stops there and says so, keeping what it found. Sizes above ``config.MAX_BATCH_SIZE`` are
never tried.

``MaxBatchSearch`` is the search alone, over results handed to it (no clock, no process): ``search`` drives it with
any try function. ``measure_max_batch`` is the run: every try through ``sweep.run_worker`` into one new throughput
run folder (all tries in summary.json as ordinary batch results), and the verdict in ``results.layout.MAX_BATCH`` beside
it, replaced atomically after every try so that a killed or interrupted search leaves what it had found.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainbench.bench.sweep import INTERRUPTED, finish_run, run_worker, start_run
from trainbench.bench.throughput_run import ThroughputRun
from trainbench.bench.worker import rate_text
from trainbench.config import MAX_BATCH_SIZE, BenchConfig
from trainbench.render.console import per_second
from trainbench.results.fields import PEAK_MEMORY_BYTES
from trainbench.results.files import write_json_atomic
from trainbench.results.layout import MAX_BATCH
from trainbench.results.records import BatchResult, Status, is_measurement

# Why a try did not fit.
OOM = "oom"
OVER_LIMIT = "over the limit"


_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
          "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}
MAX_LIMIT_BYTES = 2**60  # 1 EiB: beyond any machine; a larger "limit" is a typo


def parse_bytes(text: str) -> int:
    """``--memory-limit``: a whole number of bytes, or a number with a unit: ``24GiB``/``24Gi`` (binary, 2**30),
    ``2GB``/``2G`` (decimal, 10**9), k/M/G/T and Ki/Mi/Gi/Ti, the final B optional, case ignored. ValueError says
    what is wrong."""
    words = text.strip().replace(" ", "").replace("_", "")
    stripped = words[:-1] if words[-1:] in ("b", "B") else words
    number = stripped.rstrip("kKmMgGtTiI")
    unit = stripped[len(number):].lower()
    if unit not in _UNITS or not number:
        raise ValueError(f"{text!r} is not a number of bytes (e.g. 1073741824, 512MiB, 24GiB, 2GB)")
    try:
        value = float(number) * _UNITS[unit] if unit else int(number)
    except ValueError:
        raise ValueError(f"{text!r} is not a number of bytes (e.g. 1073741824, 512MiB, 24GiB, 2GB)") from None
    if not value >= 1 or value > MAX_LIMIT_BYTES:  # "not >=" also refuses NaN
        raise ValueError(f"{text!r} is not between 1 byte and {MAX_LIMIT_BYTES} bytes")
    return int(value)


def mib(size: float) -> str:
    return f"{size / 2**20:.1f} MiB"


@dataclass(frozen=True)
class Try:
    """One batch size tried: its result as recorded in summary.json and the search's reading of it. ``fits`` is
    None when the result says nothing about memory (``why`` then says what it said)."""

    result: BatchResult
    fits: bool | None
    why: str | None = None

    @property
    def batch_size(self) -> int:
        return self.result.batch_size

    @property
    def peak(self) -> int | None:
        return peak_of(self.result)

    def to_json(self) -> dict[str, Any]:
        return {"batch_size": self.batch_size, "fits": self.fits, "status": self.result.status.value,
                PEAK_MEMORY_BYTES: self.peak, "why": self.why}


def peak_of(result: BatchResult) -> int | None:
    """The result's peak memory in bytes; None when it measured none (or wrote something else there)."""
    peak = result.values.get(PEAK_MEMORY_BYTES)
    return int(peak) if is_measurement(peak) and peak is not None else None


def judge(result: BatchResult, limit: int | None) -> Try:
    """Whether ``result`` fits (within ``limit`` bytes of peak memory when there is one)."""
    if result.status is Status.OOM:
        return Try(result, False, OOM)
    if not result.ok:
        return Try(result, None, f"{result.status.value}: {result.error}")
    if limit is None:
        return Try(result, True)
    peak = peak_of(result)
    if peak is None:
        return Try(result, None, f"measured no {PEAK_MEMORY_BYTES} to judge against the memory limit")
    return Try(result, True) if peak <= limit else Try(result, False, OVER_LIMIT)


@dataclass
class MaxBatchSearch:
    """The search's state: the tries so far, in order; ``next_size`` says which batch size to try next (None: the
    search has ended), ``record`` takes its result."""

    start: int
    limit: int | None = None
    cap: int = MAX_BATCH_SIZE
    tries: list[Try] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 1 <= self.start <= self.cap:
            raise ValueError(f"the search starts at {self.start}, outside 1..{self.cap}")

    @property
    def largest_fit(self) -> Try | None:
        fits = [t for t in self.tries if t.fits]
        return max(fits, key=lambda t: t.batch_size) if fits else None

    @property
    def first_no_fit(self) -> Try | None:
        """The smallest batch size tried that did not fit: the next size tried above the largest fit."""
        misses = [t for t in self.tries if t.fits is False]
        return min(misses, key=lambda t: t.batch_size) if misses else None

    @property
    def stopped(self) -> Try | None:
        """The try that ended the search without a memory verdict (an error, a divergence, an interruption)."""
        return next((t for t in self.tries if t.fits is None), None)

    def next_size(self) -> int | None:
        if not self.tries:
            return self.start
        if self.stopped is not None:
            return None
        fit, miss = self.largest_fit, self.first_no_fit
        if miss is None:  # every try so far fitted: keep doubling, up to the cap
            assert fit is not None
            return min(2 * fit.batch_size, self.cap) if fit.batch_size < self.cap else None
        # Bisection: every size tried lies between the largest fit and the smallest miss, so the two stay ordered.
        low = fit.batch_size if fit is not None else 0  # nothing fitted yet: towards 1
        return (low + miss.batch_size) // 2 if miss.batch_size - low > 1 else None

    def record(self, result: BatchResult) -> Try:
        expected = self.next_size()
        if result.batch_size != expected:
            raise ValueError(f"a result for batch size {result.batch_size}, the search asked for {expected}")
        tried = judge(result, self.limit)
        self.tries.append(tried)
        return tried

    @property
    def complete(self) -> bool:
        """The search ran to its end: a gap of 1, nothing fits, or the cap reached."""
        return bool(self.tries) and self.stopped is None and self.next_size() is None

    def to_json(self) -> dict[str, Any]:
        """The verdict as max_batch.json holds it (the format version is stamped on writing)."""
        fit, miss, stopped = self.largest_fit, self.first_no_fit, self.stopped
        return {
            "memory_limit_bytes": self.limit,
            "start": self.start,
            "complete": self.complete,
            "largest_fit": None if fit is None else {
                "batch_size": fit.batch_size, "samples_per_sec": fit.result.values.get("samples_per_sec"),
                PEAK_MEMORY_BYTES: fit.peak, "peak_memory_kind": fit.result.values.get("peak_memory_kind")},
            "first_no_fit": None if miss is None else {
                "batch_size": miss.batch_size, "why": miss.why, PEAK_MEMORY_BYTES: miss.peak,
                "error": miss.result.error},
            "stopped": None if stopped is None else f"batch size {stopped.batch_size}: {stopped.why}",
            "capped": bool(fit and miss is None and fit.batch_size >= self.cap),
            "tries": [t.to_json() for t in self.tries],
        }

    def summary_line(self, sample_unit: str = "sample") -> str:
        """"largest batch that fits: 12 (345.6 samples/s, peak 800.0 MiB within 1024.0 MiB)", or why there is
        none; one line."""
        fit, miss, stopped = self.largest_fit, self.first_no_fit, self.stopped
        if fit is None and stopped is not None:
            text = "no batch size found that fits"
        elif fit is None:
            text = "no batch size fits" + (f": batch size 1 does not ({_miss_text(miss, self.limit)})"
                                           if miss is not None else "")
        else:
            rate = fit.result.values.get("samples_per_sec")
            details = [f"{rate:.2f} {per_second(sample_unit)}" if isinstance(rate, int | float) else None,
                       None if fit.peak is None else f"peak {mib(fit.peak)}"
                       + (f" within {mib(self.limit)}" if self.limit is not None else "")]
            shown = ", ".join(d for d in details if d)
            text = f"largest batch that fits: {fit.batch_size}" + (f" ({shown})" if shown else "")
            if miss is not None:
                text += f"; {miss.batch_size} does not ({_miss_text(miss, self.limit)})"
            elif fit.batch_size >= self.cap:
                text += f"; {self.cap} is the largest batch size trainbench tries"
        if stopped is not None:
            text += (f"; the search stopped at batch size {stopped.batch_size}: {stopped.why} (not a memory "
                     "verdict)")
        return text


def _miss_text(miss: Try, limit: int | None) -> str:
    if miss.why == OVER_LIMIT and miss.peak is not None and limit is not None:
        return f"peak {mib(miss.peak)} over {mib(limit)}"
    return OOM


def search(try_batch: Callable[[int], BatchResult], start: int, limit: int | None = None, cap: int = MAX_BATCH_SIZE,
           after_try: Callable[[MaxBatchSearch], None] | None = None) -> MaxBatchSearch:
    """Run the search, ``try_batch(size)`` measuring each size; ``after_try`` sees the state after every try. A
    KeyboardInterrupt in a try is recorded as that size's interruption, shown to ``after_try``, and raised on."""
    state = MaxBatchSearch(start, limit, cap)
    while (size := state.next_size()) is not None:
        try:
            result = try_batch(size)
        except KeyboardInterrupt:
            state.record(BatchResult.failed(size, Status.INTERRUPTED, INTERRUPTED))
            if after_try is not None:
                after_try(state)
            raise
        state.record(result)
        if after_try is not None:
            after_try(state)
    return state


def _verdict_text(tried: Try, limit: int | None) -> str:
    if tried.fits:
        return "fits" + (f" (peak {mib(tried.peak)} within {mib(limit)})"
                         if limit is not None and tried.peak is not None else "")
    if tried.fits is False:
        return f"does not fit ({_miss_text(tried, limit)})"
    return "no memory verdict: the search stops here"


def measure_max_batch(config: BenchConfig, output: Path, limit: int | None, echo: Callable[[str], None],
                      timeout_s: float | None = None) -> tuple[ThroughputRun, MaxBatchSearch]:
    """The search from ``config.batch_size`` into a new run folder under ``output``: each try a worker
    (``run_worker``) recorded in summary.json, the verdict in ``MAX_BATCH`` after every try. A Ctrl-C leaves
    every try recorded and the partial verdict written, then goes on up (the CLI says so and exits 130)."""
    model = config.model
    store, environment = start_run(config, output, echo)
    verdict_path = store.path / MAX_BATCH
    write_json_atomic(verdict_path, MaxBatchSearch(config.batch_size, limit).to_json())  # a search, from its start
    versions: dict[str, Any] = {}

    def try_batch(size: int) -> BatchResult:
        nonlocal versions
        echo(f"batch size {size}: running (log: {store.log_path(size)})")
        outcome = run_worker(dataclasses.replace(config, batch_size=size), store, timeout_s, timeline=True)
        versions = versions or outcome.versions
        return outcome.result

    latest: list[MaxBatchSearch] = []

    def after_try(state: MaxBatchSearch) -> None:
        latest[:] = [state]
        write_json_atomic(verdict_path, state.to_json())
        tried = state.tries[-1]
        measured = rate_text(tried.result.values, model.spec.sample_unit) if tried.result.ok else (
            f"{tried.result.status}: {tried.result.error}")
        echo(f"batch size {tried.batch_size}: {measured}: {_verdict_text(tried, limit)}")

    try:
        state = search(try_batch, config.batch_size, limit, MAX_BATCH_SIZE, after_try)
    finally:
        if latest:  # again: a Ctrl-C that landed while the last try's verdict was being written
            write_json_atomic(verdict_path, latest[0].to_json())
        finish_run(store, model, environment, versions, echo)
    echo(f"verdict: {verdict_path}")
    echo(state.summary_line(model.spec.sample_unit))
    return store, state
