"""CSV cells a spreadsheet cannot run (OWASP "CSV injection"): every CSV export writes its cells
through `csv_cell`, since a user name, a reason or any text a user typed lands in some export.

A text cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage return is read as a formula by
Excel, LibreOffice and Google Sheets; prefixed with a single quote it is shown as the text it is
(the `csv` module then quotes what needs quoting). Numbers are written as numbers: a negative
number is data, not a formula, and a spreadsheet must still be able to sum the column."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """`value` as an export writes it: a text that a spreadsheet would evaluate gets a leading `'`."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_row(values: Iterable[Any]) -> list[Any]:
    return [csv_cell(v) for v in values]
