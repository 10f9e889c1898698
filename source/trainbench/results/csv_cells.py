"""CSV cells that a spreadsheet cannot run: every CSV the suite writes passes its cells through here.

A cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is a formula to Excel, LibreOffice and
Google Sheets (``=HYPERLINK("http://...", "x")`` in a folder name, a kernel name or an error text becomes a live link
or a command when ranking.csv is opened). OWASP's rule: such a text cell gets a leading single quote, which the
spreadsheet shows as text. Numbers are left as they are, in any notation ("-1.5", "-inf", "+3e8"), and so is every
value that is not a text; what the suite reads back from its own CSVs is numbers, fixed words and names, which no
rule here changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutral(value: Any) -> Any:
    """``value`` as a CSV cell a spreadsheet shows as text: a text that starts like a formula and is no number gets a
    leading ``'``; anything else is returned unchanged."""
    if not isinstance(value, str) or not value.startswith(FORMULA_STARTS):
        return value
    try:
        float(value)
    except ValueError:
        return "'" + value
    return value


def neutral_rows(rows: Iterable[Mapping[str, Any]]) -> Iterator[dict[str, Any]]:
    """Each row with its cells made neutral (for ``csv.DictWriter``)."""
    for row in rows:
        yield {key: neutral(value) for key, value in row.items()}


def neutral_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` with the cells of its text columns made neutral, its column names too (for ``to_csv``);
    columns of numbers are not touched."""
    from pandas.api.types import is_numeric_dtype

    out = frame.rename(columns=neutral)
    for position in range(out.shape[1]):
        if not is_numeric_dtype(out.dtypes.iloc[position]):  # text columns: object or str, whichever pandas makes
            out.isetitem(position, out.iloc[:, position].map(neutral))
    return out
