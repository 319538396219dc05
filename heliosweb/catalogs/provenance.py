"""A boot's provenance as the web stores it: gpu_runner's `Provenance` with the bounds of storage.

`Provenance.parse` holds an upload or a capture's result to the read keys' types and to what a
database stores (a `{"drift": "x"}` once answered 201, then broke every page listing boots, for
good: boots are append-only); `Provenance.read` reads a key of the wrong type, stored before this
check, as absent. Other keys are kept as given.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gpu_runner.provenance import Drift as Drift
from gpu_runner.provenance import Provenance as BootProvenance
from heliosweb.common.bounds import check_text
from scheduler_core.errors import InvalidInput
from scheduler_core.validation import require_mapping, text_problem

MAX_PROVENANCE_BYTES = 64 * 1024  # where a boot came from, not a place for its data

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")  # a NUL, a surrogate (one left alone in a str)


def _clean_text(value: Any) -> Any:
    """`value` with every string's NUL and lone surrogates (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return _UNSTORABLE.sub("\ufffd", value) if text_problem(value) else value
    if isinstance(value, dict):
        return {_clean_text(k): _clean_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean_text(v) for v in value]
    return value


class Provenance(BootProvenance):
    """gpu_runner's typed provenance, with what storing it takes (`parse`, `repair`)."""

    @classmethod
    def parse(cls, value: Any, field: str = "provenance") -> dict[str, Any]:
        """`value` (None: `{}`) as it may be stored (bounded, storable text, the read keys of their
        types), or InvalidInput naming the key (`provenance.drift`)."""
        data = require_mapping({} if value is None else value, field)
        size = len(json.dumps(data).encode())
        if size > MAX_PROVENANCE_BYTES:
            raise InvalidInput(field, f"is {size:,} bytes as JSON, at most {MAX_PROVENANCE_BYTES:,} allowed")
        check_text(data, field)
        cls.typed(data, field, strict=True)
        return data

    @classmethod
    def repair(cls, stored: Any) -> dict[str, Any] | None:
        """A provenance stored before `parse` checked it, made to pass (a mistyped read key moves
        under `unvalidated`, bad characters become U+FFFD); None when it passes already."""
        try:
            cls.parse(stored)
            return None
        except InvalidInput:
            pass
        data = _clean_text(stored if isinstance(stored, dict) else {"unvalidated": stored})
        typed = cls.typed(data, "provenance", strict=False)
        moved = {name: data.pop(name) for name in cls.READ if name in data and getattr(typed, name) is None}
        if moved:
            data["unvalidated"] = {
                **(data.get("unvalidated") if isinstance(data.get("unvalidated"), dict) else {}),
                **moved,
            }
        if len(json.dumps(data).encode()) > MAX_PROVENANCE_BYTES:
            data = {"unvalidated": f"provenance over {MAX_PROVENANCE_BYTES:,} bytes, dropped"}
        return data
