"""True-cost models: what a launch really costs, as opposed to what the catalog predicts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from .catalog import DEFAULT_PREFILL_CAPACITIES, MAX_GRAPHS, Catalog, build_catalog
from .errors import InvalidInput
from .limits import MAX_DURATION_MS, MAX_TOKENS
from .profiles import PROFILES, load_profile
from .validation import reject_unknown_keys, require_int, require_list, require_mapping, require_number


class ExecutionModel(Protocol):
    @property
    def first_token_ms(self) -> float:
        """Sampling the first token after the last prefill chunk (ms)."""
        ...

    def launch_ms(self, prefill: int, decode: int = 0) -> float:
        """True duration of one launch of the graph (prefill, decode), padding included."""
        ...


@dataclass(frozen=True, slots=True)
class AffineExecution:
    """The spec's model: a fixed launch cost plus a cost per token the graph carries (padding too)."""

    fixed_ms: float = 2.0
    ms_per_token: float = 1 / 64
    first_token_ms: float = 0.10

    def launch_ms(self, prefill: int, decode: int = 0) -> float:
        return self.fixed_ms + (prefill + decode) * self.ms_per_token

    def to_dict(self) -> dict[str, Any]:
        return {"fixed_ms": self.fixed_ms, "ms_per_token": self.ms_per_token, "first_token_ms": self.first_token_ms}

    @classmethod
    def parse(cls, data: Any, field_name: str = "execution") -> AffineExecution:
        data = require_mapping(data, field_name)
        reject_unknown_keys(data, {"fixed_ms", "ms_per_token", "first_token_ms"}, field_name)
        values = {}
        for key in ("fixed_ms", "ms_per_token", "first_token_ms"):
            if key not in data:
                raise InvalidInput(f"{field_name}.{key}", "is required")
            values[key] = require_number(data[key], f"{field_name}.{key}", minimum=0.0, maximum=MAX_DURATION_MS)
        return cls(**values)


@dataclass(frozen=True)
class TableExecution:
    """True durations per shape, e.g. measured on real hardware by gpu_runner."""

    ms_by_shape: dict[tuple[int, int], float]
    first_token_ms: float = 0.0

    def launch_ms(self, prefill: int, decode: int = 0) -> float:
        try:
            return self.ms_by_shape[(prefill, decode)]
        except KeyError:
            raise InvalidInput(
                "execution", f"the table has no duration for shape prefill={prefill} decode={decode}"
            ) from None

    @classmethod
    def from_catalog(cls, catalog: Catalog, first_token_ms: float = 0.0) -> TableExecution:
        """Treat a (real, measured) catalog as the truth; its unmeasured shapes cannot be executed."""
        return cls({g.shape: g.ms for g in catalog.graphs if g.ms is not None}, first_token_ms)

    @classmethod
    def parse(cls, data: Any, field_name: str = "execution") -> TableExecution:
        data = require_mapping(data, field_name)
        reject_unknown_keys(data, {"table", "first_token_ms"}, field_name)
        table: dict[tuple[int, int], float] = {}
        rows = require_list(data.get("table"), f"{field_name}.table")
        if len(rows) > MAX_GRAPHS:
            raise InvalidInput(f"{field_name}.table", f"has {len(rows)} rows, at most {MAX_GRAPHS} allowed")
        for i, row in enumerate(rows):
            f = f"{field_name}.table[{i}]"
            row = require_mapping(row, f)
            shape = (
                require_int(row.get("prefill"), f"{f}.prefill", minimum=0, maximum=MAX_TOKENS),
                require_int(row.get("decode"), f"{f}.decode", minimum=0, maximum=MAX_TOKENS),
            )
            table[shape] = require_number(row.get("ms"), f"{f}.ms", minimum=0.0, maximum=MAX_DURATION_MS)
        first = require_number(
            data.get("first_token_ms", 0.0), f"{field_name}.first_token_ms", minimum=0.0, maximum=MAX_DURATION_MS
        )
        return cls(table, first)


def parse_execution(data: Any, field_name: str = "execution") -> ExecutionModel:
    """An affine model ({fixed_ms, ms_per_token, first_token_ms}), a table ({table: [...]}) or a
    shipped GPU profile by name ({profile: "llama-2-7b-a100"})."""
    if isinstance(data, dict) and "profile" in data:
        reject_unknown_keys(data, {"profile"}, field_name)
        if data["profile"] not in PROFILES:
            raise InvalidInput(f"{field_name}.profile", f"must be one of {list(PROFILES)}, got {data['profile']!r}")
        return load_profile(data["profile"])
    if isinstance(data, dict) and "table" in data:
        return TableExecution.parse(data, field_name)
    return AffineExecution.parse(data, field_name)


def measured_catalog(
    execution: ExecutionModel,
    capacities: tuple[int, ...] = DEFAULT_PREFILL_CAPACITIES,
    decode_rows: tuple[int, ...] = (),
    mixed: tuple[tuple[int, int], ...] = (),
) -> Catalog:
    """A faithful catalog: every graph measured at exactly its true cost (the pull request's 'clean')."""
    return build_catalog(execution.launch_ms, capacities=capacities, decode_rows=decode_rows, mixed=mixed)
