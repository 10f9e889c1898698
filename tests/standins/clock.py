"""A stand-in clock: time that only the test moves, so figures computed from it do not depend on the machine's speed
or load.

One ``StandInClock`` is given to everything a test times with: the code under test where it takes a clock (seconds,
as ``time.monotonic`` or ``time.perf_counter``: call the clock) and the stand-in NVML (``fresh(spec,
clock_ns=clock.ns)``: nanoseconds, as ``time.monotonic_ns``). A stand-in step calls ``advance`` instead of sleeping.
Whole nanoseconds are kept, so intervals add up exactly as a real monotonic clock's do.
"""

from __future__ import annotations

START_S = 1000.0  # far from 0, as a real monotonic clock is: nothing may take its reading for a duration


class StandInClock:
    def __init__(self, start_s: float = START_S) -> None:
        self._ns = round(start_s * 1e9)

    def __call__(self) -> float:
        return self._ns / 1e9

    def ns(self) -> int:
        return self._ns

    def advance(self, seconds: float) -> None:
        # One thread moves it (the test's step); others only read it: an int's rebinding is atomic.
        self._ns += round(seconds * 1e9)
