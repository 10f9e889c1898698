"""Profiler unit spellings to one base unit per quantity, so rows rescaled per launch can be compared.

ncu rescales values per row unless ``--print-units base`` is given (``nsecond``/``usecond``/``msecond``, the
2025 spellings ``ns``/``us``/``ms``, ``Kbyte``/``Mbyte``, ``Ghz``, ``cycle/nsecond``). Prefixes are decimal
(ncu's ``Kbyte`` is 1000 bytes). A duration becomes nanoseconds (ncu's base unit for time); a rate's time
denominator becomes seconds. Unknown units are kept as they are, with factor 1.
"""

from __future__ import annotations

from functools import cache

# Decimal exponents, kept as integers so that factors are exact powers of ten.
_PREFIX_EXP = {"": 0, "n": -9, "u": -6, "m": -3, "K": 3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15}
_SHORT_TIME_EXP = {"ns": -9, "us": -6, "ms": -3, "s": 0}
_BASES = ("second", "byte", "cycle", "inst", "warp", "thread", "block", "sector", "request", "wavefront", "hz")
_NANO_EXP = -9


def _term(term: str) -> tuple[str, int] | None:
    """One side of a unit, e.g. ``Mbyte`` -> (``byte``, 6); None when it is not a known prefixed unit."""
    if term in _SHORT_TIME_EXP:
        return "second", _SHORT_TIME_EXP[term]
    lowered = term[:-2] + "hz" if term.endswith("Hz") else term
    for base in _BASES:
        if lowered.endswith(base):
            prefix = lowered[: -len(base)]
            if prefix in _PREFIX_EXP:
                return base, _PREFIX_EXP[prefix]
    return None


@cache
def normalise_unit(unit: str) -> tuple[str, float]:
    """(base unit, factor): multiply a value in ``unit`` by factor to get it in the base unit."""
    parts = unit.strip().split("/")
    numerator = _term(parts[0]) if len(parts) <= 2 else None
    if numerator is None:
        return unit, 1.0
    base, exp = numerator
    if len(parts) == 1:
        if base == "second":  # durations in ns, ncu's base unit for time
            return "nsecond", 10.0 ** (exp - _NANO_EXP)
        return base, 10.0**exp
    denominator = _term(parts[1]) or (parts[1], 0)
    return f"{base}/{denominator[0]}", 10.0 ** (exp - denominator[1])
