"""The telemetry record, declared once.

A batch (`Batch`) carries launch records (`LaunchRecord`: one prefill launch) and request records
(`RequestRecord`: one finished request). Each field is declared here with its type, bounds and
meaning; the server's validator, the simulated engine, the benches, the tests' record builders and
`docs/telemetry.md`'s field table all read these declarations, so adding a field is one edit here
(plus its test). A request record's field may be `optional` (an engine that does not know it leaves
it out); one declared `reported=Reported(...)` is shown on the live page and in `/metrics` with no
other edit. `SCHEMA` is sent in every batch: a change to what a record means is a new number, and
the schema before it is read until `PREVIOUS_READ_UNTIL` (`schema_answer`).

Standard library only: this module is shared by the server and by engines.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import MISSING, Field, dataclass, field, fields
from datetime import date
from itertools import repeat
from operator import ge, le
from typing import Any, ClassVar

SCHEMA = 3  # 3: optional reported fields on request records (`output_tokens`)
PREVIOUS_SCHEMA = 2  # 2: every field required; 1: integer request ids, no session (refused)
PREVIOUS_READ_UNTIL = date(2027, 6, 30)  # the last day schema 2 is read
MAX_RECORDS = 10_000  # per batch
MAX_TOKENS = 1_048_576  # any token count or graph capacity
MAX_MS = 1_000_000.0  # any duration
MAX_ID_CHARS = 128  # a string request id
MAX_INT = 2**63 - 1  # an integer id or batch number (the database's bigint)
MAX_VERSION = 2**31 - 1
MAX_NAME = 32  # a policy or chooser name
MAX_ENGINE = 64  # an engine's name
MAX_T_MS = 1e14  # Unix milliseconds (the year 5138): the server's raw window is the real bound
MAX_ITL_VALUES = 100_000  # token gaps of one request
MAX_PREFILL_LAUNCHES = 10_000  # prefill launches of one request

RequestId = int | str


@dataclass(frozen=True)
class Spec:
    """What one field may hold. `kind`: int, number (int or float, finite), id (an integer or a
    string of printable characters), name (a short printable string), uuid, int_list, number_list."""

    kind: str
    doc: str
    minimum: float = 0
    maximum: float = 0
    min_items: int = 0
    max_items: int = 0

    def problem(self, value: Any) -> str | None:
        """Why `value` does not fit, or None when it does."""
        where = self.where(value)
        return None if where is None else f"{where[0]} {where[1]}".lstrip()

    def where(self, value: Any) -> tuple[str, str] | None:
        """Where in `value` (`""`, or `"[j]"` for a list's item) and why it does not fit, or None."""
        kind = self.kind
        if kind.endswith("_list"):
            if not isinstance(value, list) or not self.min_items <= len(value) <= self.max_items:
                return "", f"must be a list of {self.min_items:,} to {self.max_items:,} values, got {_shown(value)}"
            check = _int_problem if kind == "int_list" else _number_problem
            for j, item in enumerate(value):
                why = check(item, self.minimum, self.maximum)
                if why is not None:
                    return f"[{j}]", why
            return None
        why = self._scalar_problem(value)
        return None if why is None else ("", why)

    def _scalar_problem(self, value: Any) -> str | None:
        kind = self.kind
        if kind == "int":
            return _int_problem(value, self.minimum, self.maximum)
        if kind == "number":
            return _number_problem(value, self.minimum, self.maximum)
        if kind == "id":
            if type(value) is int:
                return _int_problem(value, 0, MAX_INT)
            return _text_problem(value, MAX_ID_CHARS, "an integer >= 0 or a string")
        if kind == "name":
            return _text_problem(value, MAX_NAME, "a name")
        if kind == "uuid":
            return _uuid_problem(value)
        if kind == "slug":
            if type(value) is not str or not 0 < len(value) <= MAX_ENGINE or not set(value) <= _SLUG:
                return f"must be 1-{MAX_ENGINE} letters, digits, '-' or '_', got {_shown(value)}"
            return None
        raise ValueError(f"no such kind of field: {kind!r}")

    def json_schema(self) -> dict[str, Any]:
        """The field as JSON Schema (the server's OpenAPI schema reads it): the same bounds;
        "printable" is stated as no control character, the rest of `str.isprintable` in `doc`."""
        kind = self.kind
        if kind in ("int", "number"):
            return {"type": "integer" if kind == "int" else "number", "minimum": self.minimum, "maximum": self.maximum}
        if kind.endswith("_list"):
            item = Spec(kind.removesuffix("_list"), "", self.minimum, self.maximum).json_schema()
            return {"type": "array", "items": item, "minItems": self.min_items, "maxItems": self.max_items}
        if kind == "id":
            return {"oneOf": [{"type": "integer", "minimum": 0, "maximum": MAX_INT}, _printable(MAX_ID_CHARS)]}
        if kind == "name":
            return _printable(MAX_NAME)
        if kind == "slug":
            return {"type": "string", "pattern": f"^[-_0-9a-zA-Z]{{1,{MAX_ENGINE}}}$"}
        if kind == "uuid":
            return {"type": "string", "pattern": "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"}
        if kind == "records":
            kinds = [_closed(cls, {"type": {"type": "string", "enum": [name]}}) for name, cls in RECORDS.items()]
            return {"type": "array", "items": {"oneOf": kinds}, "minItems": 1, "maxItems": MAX_RECORDS}
        raise ValueError(f"no JSON Schema for a field of kind {kind!r}")

    def column_ok(self, column: Sequence[Any]) -> bool:
        """Whether every value of a non-empty column fits, by C loops (`map`, `set`, `min`) rather
        than a Python call per value; False may also mean "check them one by one" (a mixed id column)."""
        kind = self.kind
        if kind == "int":
            return set(map(type, column)) == _INT and min(column) >= self.minimum and max(column) <= self.maximum
        if kind == "number":
            return (
                set(map(type, column)) <= _NUMBER
                and all(map(le, repeat(self.minimum), column))  # NaN fails both comparisons
                and all(map(ge, repeat(self.maximum), column))
            )
        if kind == "id":
            types = set(map(type, column))
            if types == _INT:
                return bool(min(column) >= 0 and max(column) <= MAX_INT)
            return types == _STR and _texts_ok(column, MAX_ID_CHARS)
        if kind == "name":
            return set(map(type, column)) == _STR and _texts_ok(column, MAX_NAME)
        return all(self.problem(value) is None for value in column)

    def bounds(self) -> str:
        """The bounds as the field table shows them."""
        kind = self.kind
        if kind in ("int", "number"):
            if self.minimum == self.maximum:
                return _num(self.minimum)
            return f"{_num(self.minimum)} to {_num(self.maximum)}"
        if kind == "id":
            return f"integer 0 to 2^63-1, or 1 to {MAX_ID_CHARS} printable characters"
        if kind == "name":
            return f"1 to {MAX_NAME} printable characters"
        if kind == "slug":
            return f"1 to {MAX_ENGINE} letters, digits, `-` or `_`"
        if kind == "uuid":
            return "canonical lower-case form (`str(uuid.uuid4())`)"
        return f"{self.min_items:,} to {self.max_items:,} values, each {_num(self.minimum)} to {_num(self.maximum)}"


_INT = {int}
_NUMBER = {int, float}
_STR = {str}
_HEX = frozenset("0123456789abcdef")
_SLUG = frozenset("-_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_TYPES = {
    "int": "integer",
    "number": "number",
    "id": "integer or string",
    "name": "string",
    "uuid": "string",
    "slug": "string",
}
_TYPES |= {"int_list": "list of integers", "number_list": "list of numbers"}


@dataclass(frozen=True)
class Reported:
    """A request record's value the server shows: `title` on the live page (each batch's mean of
    the records that carry it, in `unit`), and in `/metrics` a summary `helios_reported_<field>`
    (its sum and count per recipe, engine, version and policy)."""

    title: str
    unit: str


def spec(
    kind: str,
    doc: str,
    minimum: float = 0,
    maximum: float = 0,
    *,
    items: tuple[int, int] = (0, 0),
    optional: bool = False,
    reported: Reported | None = None,
) -> Any:
    """A dataclass field declared with its `Spec`: required, or `optional` (None: not sent)."""
    metadata = {"spec": Spec(kind, doc, minimum, maximum, *items), "reported": reported}
    return field(default=None, metadata=metadata) if optional else field(metadata=metadata)


def schema_answer(number: Any, today: date) -> dict[str, Any] | None:
    """What a batch in schema `number` is told (`upgrade`), or None for the current schema.
    Raises ValueError, saying what this server reads, for a schema it no longer reads."""
    if number == SCHEMA:
        return None
    if number == PREVIOUS_SCHEMA and today <= PREVIOUS_READ_UNTIL:
        until = PREVIOUS_READ_UNTIL.isoformat()
        return {
            "schema": SCHEMA,
            "read_until": until,
            "why": f"schema {number} is read until {until}: upgrade the client",
        }
    read = f"{SCHEMA}, and {PREVIOUS_SCHEMA} until {PREVIOUS_READ_UNTIL.isoformat()}"
    got = "no schema (schema 1)" if number is None else f"schema {_shown(number)}"
    raise ValueError(f"this server reads schema {read} (docs/telemetry.md), got {got}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _num(x: float) -> str:
    return f"{int(x):,}" if x == int(x) else f"{x:g}"


def _int_problem(value: Any, minimum: float, maximum: float) -> str | None:
    if type(value) is not int or not minimum <= value <= maximum:
        return f"must be an integer from {_num(minimum)} to {_num(maximum)}, got {_shown(value)}"
    return None


def _number_problem(value: Any, minimum: float, maximum: float) -> str | None:
    finite = type(value) in _NUMBER and (math.isfinite(value) if type(value) is float else True)
    if not finite or not minimum <= value <= maximum:
        return f"must be a finite number from {_num(minimum)} to {_num(maximum)}, got {_shown(value)}"
    return None


def _text_problem(value: Any, longest: int, what: str) -> str | None:
    if type(value) is not str or not 0 < len(value) <= longest or not value.isprintable():
        return f"must be {what} of 1 to {longest} printable characters, got {_shown(value)}"
    return None


def _texts_ok(column: Sequence[str], longest: int) -> bool:
    lengths = set(map(len, column))
    return min(lengths) > 0 and max(lengths) <= longest and all(map(str.isprintable, column))


def _printable(longest: int) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": longest, "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]*$"}


def _uuid_problem(value: Any) -> str | None:
    if (
        type(value) is not str
        or len(value) != 36
        or [i for i, c in enumerate(value) if c == "-"] != [8, 13, 18, 23]
        or not set(value.replace("-", "")) <= _HEX
    ):
        return f"must be a UUID in canonical lower-case form (str(uuid.uuid4())), got {_shown(value)}"
    return None


class _Record:
    """What both record kinds share: the dict that is posted (`type` first)."""

    type: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        """The posted dict; an optional field left at None is not sent."""
        values = ((f.name, getattr(self, f.name)) for f in fields(self))  # type: ignore[arg-type]
        return {"type": self.type, **{name: v for name, v in values if v is not None}}


@dataclass(frozen=True)
class LaunchRecord(_Record):
    """One prefill launch (a CUDA graph replay, or an eager step) and the prompt chunk it carried."""

    type: ClassVar[str] = "launch"
    t_ms: float = spec("number", "when it started: Unix time in milliseconds (within the raw window)", 0, MAX_T_MS)
    request: RequestId = spec("id", "the request whose prompt chunk it carried (vLLM's `cmpl-...`, SGLang's `rid`)")
    graph: int = spec("int", "its capacity in tokens (the captured graph size)", 1, MAX_TOKENS)
    start: int = spec("int", "first prompt token it carried", 0, MAX_TOKENS)
    end: int = spec("int", "one past the last prompt token it carried: `end - start <= graph`", 1, MAX_TOKENS)
    padded: int = spec("int", "padding tokens: must equal `graph - (end - start)`", 0, MAX_TOKENS)
    chooser: str = spec(
        "name",
        "the policy that chose the graph (`cost`, `rule`, or the engine's own name; `catalog`, the old word for `cost`, is accepted)",
    )
    ms: float = spec("number", "its duration in milliseconds", 0, MAX_MS)
    policy: str = spec("name", "the prefill policy that planned it (`cost` or `rule`)")
    version: int = spec("int", "the policy version that planned it (one per batch)", 1, MAX_VERSION)


@dataclass(frozen=True)
class RequestRecord(_Record):
    """One finished request: its first-token latency, its token gaps and its prefill launches."""

    type: ClassVar[str] = "request"
    t_ms: float = spec("number", "when it finished: Unix time in milliseconds (within the raw window)", 0, MAX_T_MS)
    request: RequestId = spec("id", "the request's id, as in its launch records")
    prompt_tokens: int = spec("int", "its prompt length in tokens", 1, MAX_TOKENS)
    ttft_ms: float = spec("number", "time to its first token in milliseconds", 0, MAX_MS)
    itl_ms: list[float] = spec(
        "number_list", "the gaps between its output tokens in milliseconds", 0, MAX_MS, items=(0, MAX_ITL_VALUES)
    )
    launches: list[int] = spec(
        "int_list",
        "the capacity of each of its prefill launches, in order",
        1,
        MAX_TOKENS,
        items=(1, MAX_PREFILL_LAUNCHES),
    )
    policy: str = spec("name", "the prefill policy that planned its chunks (`cost` or `rule`)")
    version: int = spec(
        "int",
        "the policy version that planned its chunks, not the one in force when it finished (one per batch)",
        1,
        MAX_VERSION,
    )
    output_tokens: int | None = spec(
        "int",
        "the tokens it generated (optional, since schema 3)",
        0,
        MAX_TOKENS,
        optional=True,
        reported=Reported("Output tokens per finished request", "tokens"),
    )


@dataclass(frozen=True)
class Batch:
    """One POST: records of one engine session and one policy version, numbered by the engine."""

    schema: int = spec(
        "int",
        f"the record schema this batch follows: {SCHEMA} ({PREVIOUS_SCHEMA} is read until {PREVIOUS_READ_UNTIL})",
        PREVIOUS_SCHEMA,
        SCHEMA,
    )
    engine: str = spec("slug", "the engine's name (its token's, when it posts with one)")
    session: str = spec("uuid", "picked by the engine at each start; a restart picks a new one")
    batch: int = spec("int", "the engine's number for this batch in this session; a retry repeats it", 0, MAX_INT)
    records: list[dict[str, Any]] = spec("records", f"1 to {MAX_RECORDS:,} launch and request records")
    boot: int | None = field(
        default=None, metadata={"spec": Spec("int", "a stored boot the engine runs on", 1, MAX_INT)}
    )

    def to_dict(self) -> dict[str, Any]:
        body = {f.name: getattr(self, f.name) for f in fields(self)}
        if body["boot"] is None:
            del body["boot"]
        return body


RECORDS: dict[str, type[LaunchRecord] | type[RequestRecord]] = {"launch": LaunchRecord, "request": RequestRecord}


def specs(cls: type) -> dict[str, Spec]:
    """Each declared field's `Spec`, in declaration order."""
    return {f.name: f.metadata["spec"] for f in fields(cls)}


def reported(cls: type | None = None) -> dict[str, Reported]:
    """The reported fields of a record class (by default the request record as `RECORDS` holds it
    now), in declaration order."""
    return {f.name: f.metadata["reported"] for f in fields(cls or RECORDS["request"]) if f.metadata.get("reported")}


def required(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls) if _is_required(f))


def _is_required(f: Field[Any]) -> bool:
    return f.default is MISSING and f.default_factory is MISSING


def record_problem(record: Any) -> tuple[str, str] | None:
    """(field, why) for the first field of `record` (a posted dict) that does not fit its
    declaration, or None. Rules across fields and records (`end - start <= graph`, one version a
    batch, the window) are the server's; an engine may call this before it queues a record."""
    if not isinstance(record, dict):
        return "", f"must be an object, got {type(record).__name__}"
    cls = RECORDS.get(record.get("type"))  # type: ignore[arg-type]
    if cls is None:
        return "type", f"must be 'launch' or 'request', got {_shown(record.get('type'))}"
    declared = specs(cls)
    for key in record:
        if key != "type" and key not in declared:
            return key, f"unknown field (expected one of {sorted(declared)})"
    needed = required(cls)
    for name, rule in declared.items():
        if name not in record:
            if name in needed:
                return name, "is required"
            continue
        where = rule.where(record[name])
        if where is not None:
            return name + where[0], where[1]
    return None


def batch_json_schema() -> dict[str, Any]:
    """A batch as JSON Schema: each record kind a closed object told apart by `type`. Rules across
    fields and records (`end - start <= graph`, one version a batch, the window) are the server's."""
    return _closed(Batch, {})


def _closed(cls: type, extra: dict[str, Any]) -> dict[str, Any]:
    declared = {name: {**rule.json_schema(), "description": rule.doc} for name, rule in specs(cls).items()}
    for f in fields(cls):
        if f.default is None:  # `boot`: null reads as absent
            declared[f.name]["nullable"] = True
    return {
        "type": "object",
        "properties": {**extra, **declared},
        "required": sorted({*extra, *required(cls)}),
        "additionalProperties": False,
    }


def field_table(classes: Iterable[type] = (Batch, LaunchRecord, RequestRecord)) -> str:
    """The Markdown table of every declared field (what `docs/telemetry.md` shows, checked by a test)."""
    lines = ["| record | field | type | required | bounds | meaning |", "| --- | --- | --- | --- | --- | --- |"]
    for cls in classes:
        kind = getattr(cls, "type", "batch")
        if kind != "batch":
            lines.append(f"| {kind} | `type` | string | yes | `{kind}` | the record's kind |")
        for f in fields(cls):
            rule: Spec = f.metadata["spec"]
            kind_name = _TYPES.get(rule.kind, "list of records")
            bounds = "see below" if rule.kind == "records" else rule.bounds()
            need = "yes" if _is_required(f) else "no"
            lines.append(f"| {kind} | `{f.name}` | {kind_name} | {need} | {bounds} | {rule.doc} |")
    return "\n".join(lines) + "\n"
