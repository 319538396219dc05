"""The `Analysis` contract: what every analysis declares (its parameters, work estimate, result
type, the events it emits, what it needs of the service that runs it) and the one validation of
its parameters; and `Param`, what every parameter provides. The parameter classes themselves live
in `params`; this module holds what the CLI, the web and the workers rely on to run any analysis
without knowing its name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypedDict, TypeVar

from ..comparison import Pair
from ..errors import InvalidInput
from ..events import ProgressEvent

Emit = Callable[[dict[str, Any]], None]
# An analysis's result: a TypedDict it declares (`Analysis.result`), stored as JSON and read by
# the CLI's text, the web's figures and scheduler_core's trade-off.
R = TypeVar("R", bound=Mapping[str, Any])


def ignore_events(event: dict[str, Any]) -> None:
    """The default callback: analyses run the same whether anyone listens or not."""


class BootArtifact(TypedDict):
    """A boot a result yields (a capture's): its catalog and its provenance, stored as they are."""

    catalog: list[dict[str, Any]]
    provenance: dict[str, Any]


@dataclass(frozen=True)
class Param:
    """One named parameter with a default and a help line; subclasses say what values it takes."""

    kind: ClassVar[str]  # the label in `GET /api/kinds/` and the form
    metavar: ClassVar[str] = "VALUE"
    sizes_run: ClassVar[bool] = False  # named when a run is too large (the first such parameter)

    name: str
    default: Any
    help: str

    def parse(self, value: Any) -> Any:
        """The one validation of a value from JSON (API, form, CLI), or InvalidInput naming the field."""
        raise NotImplementedError

    def default_value(self) -> Any:
        return self.default

    def from_text(self, text: str) -> Any:
        """A CLI flag's (or a form field's) text as the JSON-like value `parse` takes."""
        return text

    def to_json(self, value: Any) -> Any:
        """A parsed value as it is stored (a job's params are JSON): most values already are."""
        return value

    def from_json(self, value: Any) -> Any:
        """A stored value, validated by `parse` before it was stored, back as `parse` returned it."""
        return value

    def cli_help(self) -> str:
        default = self.default_value()
        shown = ",".join(map(str, default)) if isinstance(default, list) else "none" if default is None else default
        return f"{self.help} [default: {shown}]"

    def json_schema(self) -> dict[str, Any]:
        """The value's JSON schema, bounds included (API docs)."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """How `GET /api/kinds/` and the job form describe the parameter."""
        return {
            "name": self.name,
            "kind": self.kind,
            "default": self.default_value(),
            "help": self.help,
            "minimum": None,
            "maximum": None,
            "choices": [],
            "max_items": None,
            "schema": self.json_schema(),
        }


@dataclass(frozen=True)
class Analysis(Generic[R]):
    """A named analysis: declared parameters, a work estimate with a cap, `run(params, emit)`
    returning its declared `result` type, and what it needs of whoever runs it (a recipe, a
    service's time limit) or hands back besides its result (boots), so no runner names a kind."""

    name: str
    summary: str
    params: tuple[Param, ...]
    run: Callable[[dict[str, Any], Emit], R]
    work: Callable[[dict[str, Any]], int] = field(default=lambda params: 1)
    max_work: int = 10**9
    format_text: Callable[[R], str] | None = None  # the CLI's human-readable output
    # The same text with every delta comparing a pair picked among the policies run (the CLI's
    # --pair, a job page's pick); None where the result compares no policies.
    pair_text: Callable[[R, Pair | None], str] | None = None
    # Parameters without a default that fits (declared with None): a job must give them, not null.
    required: tuple[str, ...] = ()
    # Parameter -> the one it applies with: left at its default unless that one is given (names
    # this analysis does not declare are ignored, so kinds share one mapping).
    only_with: Mapping[str, str] = field(default_factory=dict)
    # Rules of `check` that JSON Schema can state, each as a schema the parameters must meet (API docs).
    schema_rules: tuple[dict[str, Any], ...] = ()
    # Rules across parameters (raising InvalidInput), run by validate so a job breaking them is
    # refused before it is stored or queued, not when a worker picks it up.
    check: Callable[[dict[str, Any]], None] = field(default=lambda params: None)
    # The event records `run` may emit (scheduler_core.events): what listeners may rely on.
    events: tuple[type, ...] = (ProgressEvent,)
    # Old parameter name -> its name now: still accepted (API, forms' posts, CLI flags) for one
    # release after a rename, so scripts keep working (docs/api.md lists them).
    aliases: Mapping[str, str] = field(default_factory=dict)
    # The TypedDict `run` returns: what its readers (text, figures, the trade-off) may rely on;
    # a test runs every kind and holds its result to it.
    result: type[R] | None = None
    # Why a job of this kind needs a recipe (the refusal when none is chosen); "": it needs none.
    needs_recipe: str = ""
    # The boots a result yields, stored under the job's recipe with it; None: it yields none.
    boots: Callable[[R], list[BootArtifact]] | None = None
    # A service that runs until stopped (a simulated engine): its own duration in seconds from its
    # params, None for "until stopped", in place of the job time limit; None for an analysis that
    # ends by itself.
    service_duration_s: Callable[[Mapping[str, Any]], float | None] | None = None
    # A small run (seconds, on a CPU where the kind can run on one), parameters as the API takes
    # them: every kind's tests run each registered kind on its own example, so a new kind is
    # tested by declaring it; None: no run is small (a service that runs until stopped).
    example: Mapping[str, Any] | None = None

    @property
    def runs_until_stopped(self) -> bool:
        return self.service_duration_s is not None

    def params_schema(self) -> dict[str, Any]:
        """The JSON schema of this analysis's parameters, from the declarations `validate` enforces:
        each one's type, bounds and choices; the `required` ones required, defaults fill the rest; no
        other; the rules across them JSON Schema can say (`only_with`, an old name or its new one)."""
        properties = {p.name: _described(p, p.name in self.required) for p in self.params}
        for old, now in self.aliases.items():
            # No default: a generated client would send it beside the new name, and both are refused.
            like_now = {k: v for k, v in properties[now].items() if k != "default"}
            properties[old] = {**like_now, "deprecated": True, "description": f"the old name of {now}"}
        schema = {"type": "object", "properties": properties, "additionalProperties": False}
        if self.required:
            schema["required"] = list(self.required)
        rules = [self._only_with_schema(needed, names) for needed, names in self._only_with().items()]
        rules += [
            {"not": {"required": [old, now]}, "description": f"give only {now}"} for old, now in self.aliases.items()
        ]
        rules += self.schema_rules
        if rules:
            schema["allOf"] = rules
        return schema

    def _only_with(self) -> dict[str, list[str]]:
        """`only_with` among this analysis's own parameters: the one needed -> those needing it."""
        declared = {p.name for p in self.params}
        groups: dict[str, list[str]] = {}
        for name, needed in self.only_with.items():
            if name in declared and needed in declared:
                groups.setdefault(needed, []).append(name)
        return groups

    def _only_with_schema(self, needed: str, names: list[str]) -> dict[str, Any]:
        """`needed` given (not null), or each of `names` left at its default."""
        specs = {p.name: p for p in self.params}
        return {
            "description": f"{', '.join(names)} apply only with {needed}",
            "anyOf": [
                {"required": [needed], "properties": {needed: specs[needed].json_schema()}},
                {"properties": {name: {"enum": [specs[name].default_value()]} for name in names}},
            ],
        }

    def validate(self, data: Mapping[str, Any] | None) -> dict[str, Any]:
        """Fill defaults, parse every value, reject unknown names, broken cross-parameter rules and
        runs too large to finish in minutes."""
        data = self.with_current_names(data)
        known = {p.name for p in self.params}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidInput(unknown[0], f"unknown parameter for {self.name} (expected one of {sorted(known)})")
        params = {p.name: self._parse(p, data) for p in self.params}
        self._check_declared(params)
        try:
            self.check(params)
        except InvalidInput as exc:  # a rule across parameters names one of them
            exc.param = exc.param or (exc.field if exc.field in known else None)
            raise
        work = self.work(params)
        if work > self.max_work:
            size = _size_param(self.params)
            raise InvalidInput(
                size,
                f"this {self.name} run is too large ({work:,} work units, limit {self.max_work:,}); reduce its size",
                param=size,
            )
        return params

    def to_json(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Validated params as they are stored (a job's params are JSON): the storage boundary,
        where typed values (a `Catalog`) become dicts again."""
        specs = {p.name: p for p in self.params}
        return {k: specs[k].to_json(v) if k in specs else v for k, v in params.items()}

    def from_json(self, stored: Mapping[str, Any]) -> dict[str, Any]:
        """Stored params (validated before they were stored) typed again, as `validate` returned them."""
        specs = {p.name: p for p in self.params}
        return {k: specs[k].from_json(v) if k in specs else v for k, v in stored.items()}

    def _check_declared(self, params: dict[str, Any]) -> None:
        """The declared rules across parameters (`required`, `only_with`), after each value is parsed."""
        specs = {p.name: p for p in self.params}
        for name in self.required:
            if params[name] is None:
                raise InvalidInput(name, f"is required: {specs[name].help}", param=name)
        for needed, names in self._only_with().items():
            if params[needed] is None:
                for name in names:
                    if params[name] != specs[name].default_value():
                        raise InvalidInput(name, f"applies only with {needed}: give {needed} too", param=name)

    def with_current_names(self, data: Mapping[str, Any] | None) -> dict[str, Any]:
        """`data` with every old parameter name (`aliases`) replaced by its name now."""
        data = dict(data or {})
        for old, now in self.aliases.items():
            if old in data:
                if now in data:
                    raise InvalidInput(old, f"is the old name of {now}: give only {now}", param=now)
                data[now] = data.pop(old)
        return data

    @staticmethod
    def _parse(p: Param, data: Mapping[str, Any]) -> Any:
        if p.name not in data:
            return p.default_value()
        try:
            return p.parse(data[p.name])
        except InvalidInput as exc:
            exc.param = p.name
            raise


def _described(p: Param, required: bool) -> dict[str, Any]:
    """A parameter's schema with its help line; `null` allowed where it means "not given"."""
    schema = {**p.json_schema(), "description": p.help}
    optional = p.default_value() is None and not required
    return {"anyOf": [schema, {"type": "null"}], "description": p.help} if optional else schema


def _size_param(specs: tuple[Param, ...]) -> str:
    """Name the parameter to shrink: the first that sizes a run (an int or a list of them or of choices)."""
    for p in specs:
        if p.sizes_run:
            return p.name
    return specs[0].name if specs else "params"


def progress(emit: Emit, done: int, total: int, message: str = "") -> None:
    emit({"type": "progress", "done": done, "total": total, "message": message})
