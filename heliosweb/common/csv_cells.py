"""CSV cells a spreadsheet cannot run (OWASP "CSV injection"): every CSV export writes its cells
through `csv_cell`. A text cell starting with `=`, `+`, `-`, `@`, a tab or a carriage return is a
formula to Excel, LibreOffice and Google Sheets; a leading single quote shows it as text. Numbers
stay numbers: a negative number is data, and the column must still sum."""

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
