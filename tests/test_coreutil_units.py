"""Unit spellings of ncu CSVs to base units, checked against a table written out by hand."""

from __future__ import annotations

import pytest

from trainbench.analysis.units import normalise_unit

# (spelling, base unit, factor): what a value printed in that unit is worth in the base unit.
CASES = [
    ("nsecond", "nsecond", 1.0),
    ("usecond", "nsecond", 1_000.0),
    ("msecond", "nsecond", 1_000_000.0),
    ("second", "nsecond", 1_000_000_000.0),
    ("ns", "nsecond", 1.0),
    ("us", "nsecond", 1_000.0),
    ("ms", "nsecond", 1_000_000.0),
    ("s", "nsecond", 1_000_000_000.0),
    ("byte", "byte", 1.0),
    ("Kbyte", "byte", 1_000.0),
    ("Mbyte", "byte", 1_000_000.0),
    ("Gbyte", "byte", 1_000_000_000.0),
    ("Gbyte/s", "byte/second", 1_000_000_000.0),
    ("Mbyte/second", "byte/second", 1_000_000.0),
    ("Ghz", "hz", 1_000_000_000.0),
    ("Mhz", "hz", 1_000_000.0),
    ("cycle", "cycle", 1.0),
    ("Kcycle", "cycle", 1_000.0),
    ("cycle/nsecond", "cycle/second", 1_000_000_000.0),
    ("cycle/usecond", "cycle/second", 1_000_000.0),
    ("cycle/second", "cycle/second", 1.0),
    ("inst/cycle", "inst/cycle", 1.0),
    ("byte/block", "byte/block", 1.0),
    ("%", "%", 1.0),
    ("", "", 1.0),
    ("warp", "warp", 1.0),
    ("register/thread", "register/thread", 1.0),
    ("some/odd/unit", "some/odd/unit", 1.0),
    ("furlong", "furlong", 1.0),
]


@pytest.mark.parametrize(("spelling", "base", "factor"), CASES)
def test_normalise_unit(spelling: str, base: str, factor: float) -> None:
    got_base, got_factor = normalise_unit(spelling)
    assert got_base == base
    assert got_factor == pytest.approx(factor, rel=1e-12)
