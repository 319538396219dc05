"""A JSON value held to its declared type (a TypedDict, down through lists, dicts, unions and
nested TypedDicts): how a test proves that an analysis's real result is what its `Analysis.result`
tells its readers, whom mypy checks against that declaration."""

from __future__ import annotations

import types
from typing import (
    Any,
    Literal,
    NotRequired,
    Required,
    TypeVar,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

R = TypeVar("R")


def read_as(value: object, declared: type[R]) -> R:
    """A stored result read as the type its analysis declares (`Analysis.result`): what it is,
    since a test holds every kind's real result to it (`type_problems`), so mypy checks the reads."""
    return cast(R, value)


def record_keys(record: type) -> tuple[frozenset[str], frozenset[str]]:
    """(required, all) field names of a TypedDict record."""
    hints = get_type_hints(record, include_extras=True)  # evaluates postponed annotations, keeps NotRequired
    optional = {name for name, hint in hints.items() if get_origin(hint) is NotRequired}
    return frozenset(hints) - optional, frozenset(hints)


def type_problems(value: object, declared: Any, where: str = "result") -> list[str]:
    """Every place `value` differs from `declared`, by its path (`result.series.clean`): a missing
    key, an undeclared one, a value of another type. Empty: it conforms."""
    origin, args = get_origin(declared), get_args(declared)
    if declared is Any:
        return []
    if origin in (NotRequired, Required):
        return type_problems(value, args[0], where)
    if is_typeddict(declared):
        return _record_problems(value, declared, where)
    if origin in (Union, types.UnionType):
        options = [type_problems(value, a, where) for a in args]
        return [] if any(not p for p in options) else min(options, key=len)
    if origin is Literal:
        return [] if value in args else [f"{where}: {value!r} is not one of {list(args)}"]
    if declared is None or declared is type(None):
        return [] if value is None else [f"{where}: {type(value).__name__}, not null"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__}, not a list"]
        item = args[0] if args else Any
        return [p for i, v in enumerate(value) for p in type_problems(v, item, f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not an object"]
        key_type, value_type = args or (Any, Any)
        return [
            p
            for k, v in value.items()
            for p in type_problems(k, key_type, f"{where} key {k!r}") + type_problems(v, value_type, f"{where}.{k}")
        ]
    if declared is float:  # JSON writes 2.0 as 2
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return [] if ok else [f"{where}: {value!r} is not a number"]
    if declared is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{where}: {value!r} is not an integer"]
    if isinstance(declared, type):
        return [] if isinstance(value, declared) else [f"{where}: {type(value).__name__}, not {declared.__name__}"]
    raise TypeError(f"{where}: no check for {declared!r}")


def _record_problems(value: object, record: Any, where: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{where}: {type(value).__name__}, not an object ({record.__name__})"]
    required, known = record_keys(record)
    hints = get_type_hints(record, include_extras=True)
    found = [f"{where}.{k}: missing ({record.__name__})" for k in sorted(required - set(value))]
    found += [f"{where}.{k}: not declared in {record.__name__}" for k in value if k not in known]
    for key in known & set(value):
        found += type_problems(value[key], hints[key], f"{where}.{key}")
    return found
