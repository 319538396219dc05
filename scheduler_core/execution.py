"""True-cost models: what a launch really costs, as opposed to what the catalog predicts.

A catalog times shapes, but attention's cost also follows context: a prefill chunk of n tokens at
position p attends p + n keys (the p already cached and its own), and a decode row attends its
whole context (its prompt and the tokens generated so far). The step loop hands every model both
(`cached`, `context`); each model says how it costs them (docs/analyses.md, "Context").
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
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

    @property
    def max_context(self) -> int | None:
        """The model's context window in tokens (prompt and output together), None if unbounded: the
        step loop clips longer requests' prompts to fit and counts them."""
        ...

    @property
    def follows_context(self) -> bool:
        """Whether `cached` and `context` change `launch_ms` (if not, the loop may cost a run of
        identical decode launches once)."""
        ...

    def launch_ms(self, prefill: int, decode: int = 0, cached: int = 0, context: int | None = None) -> float:
        """True duration of one launch of the graph (prefill tokens, decode rows), padding included.

        `cached`: tokens of the prefill row's request already in the KV cache (its chunk starts there).
        `context`: the keys the decode rows attend, summed over the rows that carry a sequence (each
        its prompt plus the tokens it has generated; padded rows none); None: the model's reference
        context, the one a catalog of shapes is measured at."""
        ...


@dataclass(frozen=True, slots=True)
class AttentionTerm:
    """Attention's growth with context, for models whose per-shape cost was taken at none cached:
    `prefill_key_ms` per (chunk token, cached key) pair (a chunk of n tokens at position p adds
    n x p of them) and `decode_key_ms` per key a decode row attends (a launch adds the sum of its
    rows' contexts). Both 0 by default: the model then ignores context, as it always has. Calibrate
    them from an engine: prefill chunks of one size at two positions, decode steps at two contexts."""

    prefill_key_ms: float = 0.0
    decode_key_ms: float = 0.0

    KEYS = ("prefill_key_ms", "decode_key_ms")

    @property
    def active(self) -> bool:
        return self.prefill_key_ms > 0.0 or self.decode_key_ms > 0.0

    def ms(self, prefill: int, cached: int, context: int | None) -> float:
        """The term's ms for a launch (context None: the reference, none)."""
        return prefill * cached * self.prefill_key_ms + (context or 0) * self.decode_key_ms

    def to_dict(self) -> dict[str, float]:
        """Its coefficients, only when set (results made before it existed read the same)."""
        return {k: getattr(self, k) for k in self.KEYS if getattr(self, k)}

    @classmethod
    def parse(cls, data: dict[str, Any], field_name: str) -> AttentionTerm:
        values = {
            k: require_number(data[k], f"{field_name}.{k}", minimum=0.0, maximum=MAX_DURATION_MS)
            for k in cls.KEYS
            if k in data
        }
        return cls(**values)


NO_ATTENTION_TERM = AttentionTerm()


@dataclass(frozen=True, slots=True)
class AffineExecution:
    """The spec's model: a fixed launch cost plus a cost per token the graph carries (padding too),
    and optionally attention's growth with context (`attention`, none by default)."""

    fixed_ms: float = 2.0
    ms_per_token: float = 1 / 64
    first_token_ms: float = 0.10
    attention: AttentionTerm = NO_ATTENTION_TERM
    max_context: int | None = None

    KEYS = ("fixed_ms", "ms_per_token", "first_token_ms")  # each required by `parse`

    @property
    def follows_context(self) -> bool:
        return self.attention.active

    def launch_ms(self, prefill: int, decode: int = 0, cached: int = 0, context: int | None = None) -> float:
        ms = self.fixed_ms + (prefill + decode) * self.ms_per_token
        if self.attention.active:
            ms += self.attention.ms(prefill, cached, context)
        return ms

    def to_dict(self) -> dict[str, Any]:
        return {
            "fixed_ms": self.fixed_ms,
            "ms_per_token": self.ms_per_token,
            "first_token_ms": self.first_token_ms,
            **self.attention.to_dict(),
        }

    @classmethod
    def parse(cls, data: Any, field_name: str = "execution") -> AffineExecution:
        data = require_mapping(data, field_name)
        reject_unknown_keys(data, {*cls.KEYS, *AttentionTerm.KEYS}, field_name)
        values = {}
        for key in cls.KEYS:
            if key not in data:
                raise InvalidInput(f"{field_name}.{key}", "is required")
            values[key] = require_number(data[key], f"{field_name}.{key}", minimum=0.0, maximum=MAX_DURATION_MS)
        attention = AttentionTerm.parse(data, field_name)
        return cls(values["fixed_ms"], values["ms_per_token"], values["first_token_ms"], attention)


@dataclass(frozen=True)
class TableExecution:
    """True durations per shape, e.g. measured on real hardware by gpu_runner (a boot), taken as
    the cost with nothing cached; `attention` adds attention's growth with context (none by default)."""

    ms_by_shape: dict[tuple[int, int], float]
    first_token_ms: float = 0.0
    attention: AttentionTerm = NO_ATTENTION_TERM
    max_context: int | None = None

    KEYS = ("table", "first_token_ms")  # `table` required

    @property
    def follows_context(self) -> bool:
        return self.attention.active

    def launch_ms(self, prefill: int, decode: int = 0, cached: int = 0, context: int | None = None) -> float:
        try:
            ms = self.ms_by_shape[(prefill, decode)]
        except KeyError:
            raise InvalidInput(
                "execution", f"the table has no duration for shape prefill={prefill} decode={decode}"
            ) from None
        if self.attention.active:
            ms += self.attention.ms(prefill, cached, context)
        return ms

    @classmethod
    def from_catalog(
        cls, catalog: Catalog, first_token_ms: float = 0.0, attention: AttentionTerm = NO_ATTENTION_TERM
    ) -> TableExecution:
        """Treat a (real, measured) catalog as the truth; its unmeasured shapes cannot be executed."""
        return cls({g.shape: g.ms for g in catalog.graphs if g.ms is not None}, first_token_ms, attention)

    @classmethod
    def parse(cls, data: Any, field_name: str = "execution") -> TableExecution:
        data = require_mapping(data, field_name)
        reject_unknown_keys(data, {*cls.KEYS, *AttentionTerm.KEYS}, field_name)
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
        return cls(table, first, AttentionTerm.parse(data, field_name))


def parse_execution(data: Any, field_name: str = "execution") -> ExecutionModel:
    """An affine model ({fixed_ms, ms_per_token, first_token_ms}), a table ({table: [...]}), either
    with the optional `prefill_key_ms` and `decode_key_ms` (`AttentionTerm`), or a shipped GPU
    profile by name ({profile: "llama-2-7b-a100"})."""
    if isinstance(data, dict) and "profile" in data:
        reject_unknown_keys(data, {"profile"}, field_name)
        if not isinstance(data["profile"], str) or data["profile"] not in PROFILES:
            raise InvalidInput(f"{field_name}.profile", f"must be one of {list(PROFILES)}, got {data['profile']!r}")
        return load_profile(data["profile"])
    if isinstance(data, dict) and "table" in data:
        return TableExecution.parse(data, field_name)
    return AffineExecution.parse(data, field_name)


def execution_schema() -> dict[str, Any]:
    """The JSON schema of what `parse_execution` accepts, from the keys and bounds its parsers read:
    exactly one of the three shapes, each closed (API docs)."""
    ms = {"type": "number", "minimum": 0.0, "maximum": MAX_DURATION_MS}
    attention = dict.fromkeys(AttentionTerm.KEYS, ms)
    tokens = {"type": "integer", "minimum": 0, "maximum": MAX_TOKENS}
    row = {
        "type": "object",
        "properties": {"prefill": tokens, "decode": tokens, "ms": ms},
        "required": ["prefill", "decode", "ms"],
    }
    table = {"type": "array", "maxItems": MAX_GRAPHS, "items": row, "description": "true durations per shape"}
    shapes = (
        ({**dict.fromkeys(AffineExecution.KEYS, ms), **attention}, list(AffineExecution.KEYS)),
        ({"table": table, "first_token_ms": ms, **attention}, ["table"]),
        ({"profile": {"type": "string", "enum": list(PROFILES), "description": "a shipped GPU profile"}}, ["profile"]),
    )
    return {
        "oneOf": [
            {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
            for properties, required in shapes
        ],
        "description": "the true costs: an affine model, a table of durations per shape, or a GPU profile by name",
    }


def unpadded_ms(
    execution: ExecutionModel,
    sizes: Sequence[int],
    prefill: int,
    decode: int = 0,
    cached: int = 0,
    context: int | None = None,
) -> float:
    """A launch of exactly `prefill` tokens (beside `decode` rows) on an engine that pads nothing (a
    CPU), costed by a model that may know only the prefill `sizes` a boot measured (ascending): at a
    size it holds, its cost; between two, on the line between their costs; below the smallest, the
    smallest's (a step's fixed cost dominates there, as `ProfileExecution` is flat below its
    smallest sample), though attention to the cached keys stays the chunk's own. Attention's term is
    linear in the chunk, so the line carries it exactly."""
    i = bisect_left(sizes, prefill)
    if prefill == 0 or i == len(sizes) or sizes[i] == prefill:
        return execution.launch_ms(prefill, decode, cached, context)
    if i == 0:
        flat = execution.launch_ms(sizes[0], decode, 0, context)
        return flat + (execution.launch_ms(sizes[0], decode, cached, context) - flat) * prefill / sizes[0]
    lo, hi = sizes[i - 1], sizes[i]
    low, high = execution.launch_ms(lo, decode, cached, context), execution.launch_ms(hi, decode, cached, context)
    return low + (high - low) * (prefill - lo) / (hi - lo)


def measured_catalog(
    execution: ExecutionModel,
    capacities: tuple[int, ...] = DEFAULT_PREFILL_CAPACITIES,
    decode_rows: tuple[int, ...] = (),
    mixed: tuple[tuple[int, int], ...] = (),
) -> Catalog:
    """A faithful catalog: every graph measured at exactly its true cost (the pull request's 'clean')."""
    return build_catalog(execution.launch_ms, capacities=capacities, decode_rows=decode_rows, mixed=mixed)
