"""Declared analysis parameters: one source of truth for CLI flags, web forms, API docs and validation.

Each kind of parameter is a small class that owns its parsing (`parse`, the one validation), its
CLI flag (`from_text`, `metavar`, `cli_help`) and its JSON schema (`json_schema`, with the bounds
it declares); the web form picks a widget by class (`heliosweb.dashboard.param_fields`). Nothing
switches on a kind's name: `kind` is only the label the API shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..catalog import MAX_CAPACITY, MAX_GRAPHS, MAX_MS, Catalog
from ..errors import InvalidInput
from ..policies import POLICIES, selectable_policies
from ..profiles import PROFILES
from ..reading import loads, read_text
from ..traffic import TraceTraffic, from_records, parse_trace, read_trace
from ..validation import int_of_text, number_of_text, require_int, require_list, require_number

# The contract moved to `contract`; these names stay importable from here for code written before.
from .contract import Analysis as Analysis
from .contract import Emit as Emit
from .contract import Param as Param
from .contract import ignore_events as ignore_events
from .contract import progress as progress


def _with_default(schema: dict[str, Any], default: Any) -> dict[str, Any]:
    return schema if default is None else {**schema, "default": default}


def _bounds(schema: dict[str, Any], minimum: float | None, maximum: float | None) -> dict[str, Any]:
    return {
        **schema,
        **({} if minimum is None else {"minimum": minimum}),
        **({} if maximum is None else {"maximum": maximum}),
    }


@dataclass(frozen=True)
class IntParam(Param):
    kind: ClassVar[str] = "int"
    metavar: ClassVar[str] = "INT"
    sizes_run: ClassVar[bool] = True

    minimum: int | None = None
    maximum: int | None = None

    def parse(self, value: Any) -> int:
        return require_int(value, self.name, minimum=self.minimum, maximum=self.maximum)

    def from_text(self, text: str) -> Any:
        return _int_text(text, self.name)

    def json_schema(self) -> dict[str, Any]:
        return _with_default(_bounds({"type": "integer"}, self.minimum, self.maximum), self.default)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "minimum": self.minimum, "maximum": self.maximum}


@dataclass(frozen=True)
class FloatParam(Param):
    kind: ClassVar[str] = "float"
    metavar: ClassVar[str] = "FLOAT"

    minimum: float | None = None
    maximum: float | None = None

    def parse(self, value: Any) -> float:
        return require_number(value, self.name, minimum=self.minimum, maximum=self.maximum)

    def from_text(self, text: str) -> Any:
        number = number_of_text(text)
        if number is None:
            raise InvalidInput(self.name, f"must be a finite number in decimal digits, got {text[:40]!r}")
        return number

    def json_schema(self) -> dict[str, Any]:
        return _with_default(_bounds({"type": "number"}, self.minimum, self.maximum), self.default)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "minimum": self.minimum, "maximum": self.maximum}


@dataclass(frozen=True)
class OptionalFloatParam(FloatParam):
    """A number that may be left out (None): the analysis then derives it (capacity's rates, from
    the trace's own rate)."""

    def parse(self, value: Any) -> Any:  # float | None
        return None if value is None else super().parse(value)


@dataclass(frozen=True)
class ChoiceParam(Param):
    kind: ClassVar[str] = "choice"
    metavar: ClassVar[str] = "CHOICE"

    choices: tuple[str, ...] = ()

    def options(self) -> tuple[str, ...]:
        return self.choices

    def parse(self, value: Any) -> str:
        if value not in self.options():
            raise InvalidInput(self.name, f"must be one of {list(self.options())}, got {value!r}")
        return str(value)

    def from_text(self, text: str) -> Any:
        return text.strip()

    def cli_help(self) -> str:
        return f"{self.help} {{{','.join(self.options())}}} [default: {self.default_value()}]"

    def json_schema(self) -> dict[str, Any]:
        return _with_default({"type": "string", "enum": list(self.options())}, self.default_value())

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "choices": list(self.options())}


AFFINE = "affine"


@dataclass(frozen=True)
class ExecutionProfileParam(ChoiceParam):
    """The true execution model by name: `affine` (the spec's `fixed_ms + tokens x ms_per_token`,
    set by the analysis's own flags) or a shipped GPU profile (`scheduler_core.profiles`), read from
    the one registry when asked, so a new profile is offered in the CLI, the API and the form."""

    name: str = "execution"
    default: Any = AFFINE
    help: str = (
        "true cost model: affine (fixed_ms + tokens x ms_per_token) or a measured GPU profile "
        "(its table replaces fixed_ms and ms_per_token)"
    )

    def options(self) -> tuple[str, ...]:
        return (AFFINE, *PROFILES)


@dataclass(frozen=True)
class _ListParam(Param):
    """A non-empty list of items, at most `max_items`; `default=None` means "not given" is allowed."""

    max_items: int | None = None

    def parse(self, value: Any) -> Any:
        if value is None and self.default_value() is None:  # not a list whose default is filled in (policies)
            return None
        items = require_list(value, self.name)
        if not items:
            raise InvalidInput(self.name, "must not be empty")
        if self.max_items is not None and len(items) > self.max_items:
            raise InvalidInput(self.name, f"has {len(items)} items, at most {self.max_items} allowed")
        return [self.parse_item(v, f"{self.name}[]") for v in items]

    def parse_item(self, value: Any, field: str) -> Any:
        raise NotImplementedError

    def cli_help(self) -> str:
        return super().cli_help().replace(" [default:", " (comma-separated) [default:", 1)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "max_items": self.max_items}

    def _list_schema(self, item: dict[str, Any]) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "array", "items": item, "minItems": 1}
        if self.max_items is not None:
            schema["maxItems"] = self.max_items
        return _with_default(schema, self.default_value())


def _no_duplicates(items: list[Any], field: str) -> list[Any]:
    if len(set(items)) != len(items):
        raise InvalidInput(field, "has duplicate items")
    return items


@dataclass(frozen=True)
class IntListParam(_ListParam):
    kind: ClassVar[str] = "int_list"
    metavar: ClassVar[str] = "INT_LIST"
    sizes_run: ClassVar[bool] = True

    minimum: int | None = None
    maximum: int | None = None

    def parse(self, value: Any) -> list[int] | None:
        items = super().parse(value)
        return items if items is None else _no_duplicates(items, self.name)

    def parse_item(self, value: Any, field: str) -> int:
        return require_int(value, field, minimum=self.minimum, maximum=self.maximum)

    def from_text(self, text: str) -> Any:
        return [_int_text(item, self.name) for item in text.replace(";", ",").split(",") if item.strip()]

    def json_schema(self) -> dict[str, Any]:
        return {**self._list_schema(_bounds({"type": "integer"}, self.minimum, self.maximum)), "uniqueItems": True}

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "minimum": self.minimum, "maximum": self.maximum}


@dataclass(frozen=True)
class ChoiceListParam(_ListParam):
    kind: ClassVar[str] = "choice_list"
    metavar: ClassVar[str] = "CHOICE_LIST"
    sizes_run: ClassVar[bool] = True

    choices: tuple[str, ...] = ()

    def options(self) -> tuple[str, ...]:
        return self.choices

    def parse(self, value: Any) -> list[str] | None:
        items = super().parse(value)
        return items if items is None else _no_duplicates(items, self.name)

    def parse_item(self, value: Any, field: str) -> str:
        if value not in self.options():
            raise InvalidInput(field, f"must be one of {list(self.options())}, got {value!r}")
        return str(value)

    def from_text(self, text: str) -> Any:
        return [item.strip() for item in text.split(",") if item.strip()]

    def cli_help(self) -> str:
        return (
            f"{self.help} (comma-separated) {{{','.join(self.options())}}} [default: {','.join(self.default_value())}]"
        )

    def json_schema(self) -> dict[str, Any]:
        return {**self._list_schema({"type": "string", "enum": list(self.options())}), "uniqueItems": True}

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "choices": list(self.options())}


@dataclass(frozen=True)
class PolicyListParam(ChoiceListParam):
    """Policies to compare, read from scheduler_core's one registry (`policies.POLICIES`) when asked,
    so a newly registered policy is offered everywhere. By default every policy a recipe may run
    (`selectable_policies()`); `every_policy` also offers the demonstration-only ones (rule-v1)."""

    default: Any = None
    help: str = "policies to compare"
    every_policy: bool = False
    all_by_default: bool = False

    def options(self) -> tuple[str, ...]:
        return tuple(POLICIES) if self.every_policy else selectable_policies()

    def default_value(self) -> list[str]:
        return list(self.options() if self.all_by_default else selectable_policies())


@dataclass(frozen=True)
class CatalogParam(Param):
    """A catalog, parsed once here into scheduler_core's `Catalog` (from a list of graph dicts, or
    given as a `Catalog` already): analyses receive it typed, and it becomes dicts again only where
    it is stored (`to_json`: a job's params, a result). With `measured` (the default) every solo
    prefill graph must have a duration, so it can serve as the true costs too; a capture, which
    needs only shapes, turns it off. `None` (not given) is allowed when it is the default."""

    kind: ClassVar[str] = "catalog"
    metavar: ClassVar[str] = "FILE"

    measured: bool = True

    def parse(self, value: Any) -> Catalog | None:
        return None if value is None else parse_catalog(value, self.name, measured=self.measured)

    def from_text(self, text: str) -> Any:
        return read_catalog_file(text.strip(), self.name)

    def to_json(self, value: Any) -> list[dict[str, Any]] | None:
        return None if value is None else value.to_dicts()

    def from_json(self, value: Any) -> Catalog | None:
        return None if value is None else Catalog.from_dicts(value, self.name)

    def cli_help(self) -> str:
        return f"{self.help} (a JSON file: a list of graphs or a capture's output)"

    def json_schema(self) -> dict[str, Any]:
        return CATALOG_SCHEMA


@dataclass(frozen=True)
class CatalogListParam(_ListParam):
    """Catalogs (stored boots, say), each parsed once into a `Catalog` as `CatalogParam` does."""

    kind: ClassVar[str] = "catalog_list"
    metavar: ClassVar[str] = "FILE"

    measured: bool = True

    def parse_item(self, value: Any, field: str) -> Catalog:
        return parse_catalog(value, field, measured=self.measured)

    def from_text(self, text: str) -> Any:
        return [read_catalog_file(path.strip(), self.name) for path in text.split(",") if path.strip()]

    def to_json(self, value: Any) -> list[list[dict[str, Any]]] | None:
        return None if value is None else [c.to_dicts() for c in value]

    def from_json(self, value: Any) -> list[Catalog] | None:
        return None if value is None else [Catalog.from_dicts(c, f"{self.name}[]") for c in value]

    def cli_help(self) -> str:
        return f"{self.help} (JSON files, comma-separated: a list of graphs or a capture's output)"

    def json_schema(self) -> dict[str, Any]:
        return self._list_schema(CATALOG_SCHEMA)


# Two requests as JSON Lines: the example run (`Analysis.example`) of a kind that takes a trace.
EXAMPLE_TRACE = (
    '{"arrival_ms": 0, "prompt_tokens": 900, "output_tokens": 4}\n'
    '{"arrival_ms": 30, "prompt_tokens": 5000, "output_tokens": 3}\n'
)


@dataclass(frozen=True)
class TraceParam(Param):
    """A trace of real traffic (`scheduler_core.traffic`), parsed once into a `TraceTraffic`. The CLI
    names a file (Azure CSV or JSON Lines); JSON gives the trace's text, or a list of request dicts,
    at most `max_inline` of them (a stored job keeps its trace as that list). `None`: no trace."""

    kind: ClassVar[str] = "trace"
    metavar: ClassVar[str] = "FILE"

    max_inline: int = 100_000

    def parse(self, value: Any) -> TraceTraffic | None:
        if value is None or isinstance(value, TraceTraffic):
            return value
        if isinstance(value, str):  # the file's content (a form's text box, an API string), never a path
            trace = parse_trace(value, field=self.name)
        else:
            trace = from_records(require_list(value, self.name), field=self.name)
        if len(trace) > self.max_inline:
            raise InvalidInput(self.name, f"has {len(trace):,} requests, at most {self.max_inline:,} given inline")
        return trace

    def from_text(self, text: str) -> Any:
        return read_trace(text.strip(), field=self.name)

    def to_json(self, value: Any) -> list[dict[str, Any]] | None:
        return None if value is None else value.records()

    def from_json(self, value: Any) -> TraceTraffic | None:
        return None if value is None else from_records(value, field=self.name)

    def cli_help(self) -> str:
        return f"{self.help} (a file: the Azure trace's CSV or JSON Lines)"

    def json_schema(self) -> dict[str, Any]:
        return {
            "oneOf": [
                {"type": "string", "description": "the trace file's text (Azure CSV or JSON Lines)"},
                {"type": "array", "minItems": 1, "maxItems": self.max_inline, "items": TRACE_RECORD_SCHEMA},
            ]
        }


_TOKEN_POSITION = {"type": "integer", "minimum": 0, "maximum": MAX_CAPACITY}
TRACE_RECORD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "arrival_ms": {"type": "number", "minimum": 0},
        "prompt_tokens": {"type": "integer", "minimum": 1, "maximum": MAX_CAPACITY},
        "output_tokens": {"type": "integer", "minimum": 1, "maximum": MAX_CAPACITY},
        # sorted, disjoint and inside the prompt (a span [start, end), a boundary outside every span)
        "atomic_spans": {
            "type": "array",
            "items": {"type": "array", "items": _TOKEN_POSITION, "minItems": 2, "maxItems": 2},
        },
        "message_boundaries": {"type": "array", "items": {**_TOKEN_POSITION, "minimum": 1}},
    },
    "required": ["arrival_ms", "prompt_tokens", "output_tokens"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class WindowParam(Param):
    """A time window [start, end) in seconds, `START:END` on the command line; `None`: everything."""

    kind: ClassVar[str] = "window"
    metavar: ClassVar[str] = "START:END"

    maximum: float = 1e8

    def parse(self, value: Any) -> list[float] | None:
        if value is None:
            return None
        pair = [
            require_number(v, f"{self.name}[]", minimum=0.0, maximum=self.maximum)
            for v in require_list(value, self.name)
        ]
        if len(pair) != 2:
            raise InvalidInput(self.name, f"must be [start, end] in seconds, got {len(pair)} values")
        start, end = pair
        if start >= end:
            raise InvalidInput(self.name, f"start {start:g} must be < end {end:g}")
        return [start, end]

    def from_text(self, text: str) -> Any:
        start, sep, end = text.strip().partition(":")
        if not sep:
            raise InvalidInput(self.name, f"must read START:END (seconds), got {text!r}")
        try:
            return [float(start), float(end)]
        except ValueError:
            raise InvalidInput(self.name, f"must read START:END (seconds), got {text!r}") from None

    def json_schema(self) -> dict[str, Any]:
        bound = {"type": "number", "minimum": 0, "maximum": self.maximum}
        return {"type": "array", "items": bound, "minItems": 2, "maxItems": 2}

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "minimum": 0, "maximum": self.maximum}


# The bounds `Catalog.from_dicts` enforces, stated (API docs, the OpenAPI schema).
CATALOG_SCHEMA: dict[str, Any] = {
    "type": "array",
    "minItems": 1,
    "maxItems": MAX_GRAPHS,
    "items": {
        "type": "object",
        "properties": {
            "prefill": {"type": "integer", "minimum": 0, "maximum": MAX_CAPACITY},
            "decode": {"type": "integer", "minimum": 0, "maximum": MAX_CAPACITY},
            "ms": {"type": ["number", "null"], "minimum": 0, "maximum": MAX_MS},
        },
        "required": ["prefill", "decode"],
        "additionalProperties": False,
    },
}


def parse_catalog(value: Any, field: str, *, measured: bool = True) -> Catalog:
    """The one parse of a catalog entering from outside (JSON dicts, or a `Catalog` already built);
    `measured`: every solo prefill graph must be timed (it may be used as the true costs)."""
    catalog = value if isinstance(value, Catalog) else Catalog.from_dicts(value, field)
    return require_measured(catalog, field) if measured else catalog


def require_measured(catalog: Catalog, field: str) -> Catalog:
    """`catalog` if every solo prefill graph has a duration, else InvalidInput naming `field`."""
    missing = [c for c in catalog.capacities if catalog.prefill_ms[c] is None]
    if missing:
        raise InvalidInput(
            field, f"prefill graphs {missing} are unmeasured; a catalog used as true costs must be fully measured"
        )
    return catalog


def read_catalog_file(path: str, field: str) -> Any:
    """A catalog flag names a JSON file: a list of graphs, or an object with a "catalog" list (a capture's output)."""
    data = loads(read_text(path, field), field)
    return data["catalog"] if isinstance(data, dict) and "catalog" in data else data


def _int_text(text: str, field: str) -> int:
    number = int_of_text(text)
    if number is None:
        raise InvalidInput(field, f"must be an integer in decimal digits, got {text[:40]!r}")
    return number
