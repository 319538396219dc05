"""Declared analysis parameters: one source of truth for CLI flags, web forms and API validation."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..catalog import Catalog
from ..errors import InvalidInput
from ..events import ProgressEvent
from ..validation import require_int, require_list, require_number

Emit = Callable[[dict[str, Any]], None]


def ignore_events(event: dict[str, Any]) -> None:
    """The default callback: analyses run the same whether anyone listens or not."""


@dataclass(frozen=True)
class Param:
    """One parameter: `kind` is int, float, choice, int_list, choice_list, catalog or catalog_list.

    A `catalog` value is a list of graph dicts (a stored boot, say); it stays plain JSON once
    parsed. With `measured` (the default) every solo prefill graph must have a duration, so the
    catalog can serve as the true costs too; a capture, which needs only shapes, turns it off.
    """

    name: str
    kind: str
    default: Any
    help: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    max_items: int | None = None
    measured: bool = True

    def parse(self, value: Any) -> Any:
        f = self.name
        if self.kind == "int":
            return require_int(value, f, minimum=_as_int(self.minimum), maximum=_as_int(self.maximum))
        if self.kind == "float":
            return require_number(value, f, minimum=self.minimum, maximum=self.maximum)
        if self.kind == "choice":
            if value not in self.choices:
                raise InvalidInput(f, f"must be one of {list(self.choices)}, got {value!r}")
            return value
        if self.kind == "catalog":
            if value is None:
                return None
            return measured_catalog_dicts(value, f) if self.measured else Catalog.from_dicts(value, f).to_dicts()
        if self.kind in ("int_list", "choice_list", "catalog_list"):
            if value is None and self.default is None:
                return None
            items = require_list(value, f)
            if not items:
                raise InvalidInput(f, "must not be empty")
            if self.max_items is not None and len(items) > self.max_items:
                raise InvalidInput(f, f"has {len(items)} items, at most {self.max_items} allowed")
            item = Param(
                f"{f}[]",
                self.kind.removesuffix("_list"),
                None,
                self.help,
                self.minimum,
                self.maximum,
                self.choices,
                measured=self.measured,
            )
            parsed = [item.parse(v) for v in items]
            if self.kind == "catalog_list":
                return parsed
            if len(set(parsed)) != len(parsed):
                raise InvalidInput(f, "has duplicate items")
            return parsed
        raise AssertionError(f"unknown parameter kind {self.kind}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "default": self.default,
            "help": self.help,
            "minimum": self.minimum,
            "maximum": self.maximum,
            "choices": list(self.choices),
            "max_items": self.max_items,
        }


def measured_catalog_dicts(value: Any, field: str) -> list[dict[str, Any]]:
    """Validate a catalog that must be fully measured (it may be used as the truth), as plain dicts."""
    catalog = Catalog.from_dicts(value, field)
    missing = [c for c in catalog.capacities if catalog.prefill_ms[c] is None]
    if missing:
        raise InvalidInput(
            field, f"prefill graphs {missing} are unmeasured; a catalog used as true costs must be fully measured"
        )
    return catalog.to_dicts()


def _as_int(x: float | None) -> int | None:
    return None if x is None else int(x)


@dataclass(frozen=True)
class Analysis:
    """A named analysis: declared parameters, a work estimate with a cap, and `run(params, emit) -> dict`."""

    name: str
    summary: str
    params: tuple[Param, ...]
    run: Callable[[dict[str, Any], Emit], dict[str, Any]]
    work: Callable[[dict[str, Any]], int] = field(default=lambda params: 1)
    max_work: int = 10**9
    format_text: Callable[[dict[str, Any]], str] | None = None  # the CLI's human-readable output
    # Rules across parameters (raising InvalidInput), run by validate so a job breaking them is
    # refused before it is stored or queued, not when a worker picks it up.
    check: Callable[[dict[str, Any]], None] = field(default=lambda params: None)
    # The event records `run` may emit (scheduler_core.events): what listeners may rely on.
    events: tuple[type, ...] = (ProgressEvent,)

    def validate(self, data: Mapping[str, Any] | None) -> dict[str, Any]:
        """Fill defaults, parse every value, reject unknown names, broken cross-parameter rules and
        runs too large to finish in minutes."""
        data = dict(data or {})
        known = {p.name for p in self.params}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidInput(unknown[0], f"unknown parameter for {self.name} (expected one of {sorted(known)})")
        params = {p.name: p.parse(data[p.name]) if p.name in data else p.default for p in self.params}
        self.check(params)
        work = self.work(params)
        if work > self.max_work:
            raise InvalidInput(
                _size_param(self.params),
                f"this {self.name} run is too large ({work:,} work units, limit {self.max_work:,}); reduce its size",
            )
        return params


def _size_param(specs: tuple[Param, ...]) -> str:
    """Name the parameter to shrink: the first int or list parameter."""
    for p in specs:
        if p.kind in ("int", "int_list", "choice_list"):
            return p.name
    return specs[0].name if specs else "params"


def progress(emit: Emit, done: int, total: int, message: str = "") -> None:
    emit({"type": "progress", "done": done, "total": total, "message": message})
