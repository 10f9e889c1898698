"""The trust flags of one result (``results.trust``): each check at its limit and past it, and none for a value a
file does not hold."""

from __future__ import annotations

from typing import Any

import pytest

from trainbench.results.trust import BUSY_OTHER_CORES, MAX_SPREAD_PCT, MIN_WINDOW_S, trust_flags, trust_text

# A result nothing is wrong with: three 6 s windows that agree within 2 %, a quiet machine.
SOUND: dict[str, Any] = {"samples_per_sec": 800.0, "windows": 3, "window_s": 18.0, "window_cv_pct": 1.0,
                         "window_spread_pct": 2.0, "other_cpu_cores": 0.05, "load_average": 1.2}


def test_a_sound_result_has_no_flag() -> None:
    assert trust_flags(SOUND) == [] and trust_text(SOUND) == ""


def test_short_windows_are_judged_one_window_at_a_time() -> None:
    assert trust_flags(SOUND | {"windows": 3, "window_s": 3.6}) == [
        "windows of 1.2 s, under the 5 s minimum: time more steps (--steps)"]
    assert trust_flags(SOUND | {"windows": 3, "window_s": 3 * MIN_WINDOW_S}) == []  # exactly the minimum: enough
    assert trust_flags(SOUND | {"windows": 1, "window_s": 4.999}) == [
        "windows of 4.999 s, under the 5 s minimum: time more steps (--steps)"]  # never shown as 5 s
    assert trust_flags(SOUND | {"windows": 1, "window_s": 12.0}) == []


def test_windows_that_disagree_are_flagged_past_the_limit() -> None:
    assert trust_flags(SOUND | {"window_spread_pct": 105.0}) == [
        "windows spread 105 % (over the 10 % limit): more windows (--windows) or repetitions"]
    assert trust_flags(SOUND | {"window_spread_pct": MAX_SPREAD_PCT}) == []
    assert trust_flags(SOUND | {"window_spread_pct": 10.04}) == [
        "windows spread 10.04 % (over the 10 % limit): more windows (--windows) or repetitions"]


def test_a_busy_machine_is_flagged_with_its_load_average() -> None:
    assert trust_flags(SOUND | {"other_cpu_cores": 1.3, "load_average": 3.1}) == [
        "machine busy: processes outside this run kept 1.3 cores busy during the "
        "windows (limit 0.5); load average 3.1"]
    assert trust_flags(SOUND | {"other_cpu_cores": BUSY_OTHER_CORES, "load_average": 9.0}) == []  # load: no test
    assert "kept 0.5001 cores" in trust_text(SOUND | {"other_cpu_cores": 0.5001})  # never shown as 0.5
    assert "kept 12.3 cores" in trust_text(SOUND | {"other_cpu_cores": 12.34})  # three digits otherwise
    assert trust_flags(SOUND | {"other_cpu_cores": 0.75, "load_average": None}) == [
        "machine busy: processes outside this run kept 0.75 cores busy during the "
        "windows (limit 0.5)"]


def test_every_flag_at_once_in_order_and_joined() -> None:
    flagged = SOUND | {"window_s": 3.0, "window_spread_pct": 30.0, "other_cpu_cores": 2.0}
    flags = trust_flags(flagged)
    assert [flag.split(" ", 2)[:2] for flag in flags] == [["windows", "of"], ["windows", "spread"],
                                                          ["machine", "busy:"]]
    assert trust_text(flagged) == "; ".join(flags)


@pytest.mark.parametrize("missing", ["window_s", "window_spread_pct", "other_cpu_cores"])
def test_a_value_a_file_lacks_gives_no_flag_for_its_check(missing: str) -> None:
    bad = {"window_s": 1.0, "window_spread_pct": 50.0, "other_cpu_cores": 3.0}
    flags = trust_flags({name: value for name, value in bad.items() if name != missing})  # no windows: one
    assert len(flags) == 2
    assert trust_flags({**bad, missing: None}) == flags
    assert trust_flags({"samples_per_sec": 1.0, "error": None}) == []  # a file from before any of them


def test_repetitions_are_flagged_once_by_their_worst_values() -> None:
    from trainbench.results.trust import worst_of

    repetitions = [SOUND | {"windows": 3, "window_s": 12.0, "window_spread_pct": 12.0},
                   SOUND | {"windows": 3, "window_s": 13.5, "window_samples_per_sec": [90.0, 100.0, 125.0],
                            "window_spread_pct": None, "other_cpu_cores": 0.9}]
    flags = trust_flags(worst_of(repetitions))
    assert len(flags) == 3  # one of each kind, from the worst repetition
    assert flags[0].startswith("windows of 4 s,") and flags[1].startswith("windows spread 35 %")
    assert flags[2].startswith("machine busy: processes outside this run kept 0.9 cores")
    assert trust_flags(worst_of([SOUND, SOUND])) == []
