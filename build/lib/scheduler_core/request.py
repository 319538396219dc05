"""Requests and the pure arithmetic of segments and cuts (spec: "Positions, segments, cuts")."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any

from .catalog import Catalog
from .errors import InvalidInput
from .limits import MAX_TOKENS
from .validation import reject_unknown_keys, require_int, require_list, require_mapping


@dataclass(frozen=True)
class Request:
    """One prompt to prefill. Build with `Request.parse` (validated) or directly in trusted code."""

    prompt_tokens: int
    message_boundaries: tuple[int, ...] = ()
    atomic_spans: tuple[tuple[int, int], ...] = ()
    prefill_limit: int | None = None
    _span_starts: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_span_starts", tuple(s for s, _ in self.atomic_spans))

    @property
    def limit(self) -> int:
        return self.prompt_tokens if self.prefill_limit is None else self.prefill_limit

    @property
    def plan_end(self) -> int:
        """Where planning stops: the limit, cut back to the start of a span it falls inside."""
        return self.cut(min(self.limit, self.prompt_tokens))

    def segment_end(self, position: int) -> int:
        """E(p): the next message boundary after p, the prefill limit, or the prompt's end."""
        end = min(self.limit, self.prompt_tokens)
        i = bisect_right(self.message_boundaries, position)
        if i < len(self.message_boundaries) and self.message_boundaries[i] < end:
            return self.message_boundaries[i]
        return end

    def cut(self, x: int) -> int:
        """cut(x): the start of the atomic span x lies strictly inside, else x itself."""
        i = bisect_left(self._span_starts, x) - 1
        if i >= 0:
            start, end = self.atomic_spans[i]
            if start < x < end:
                return start
        return x

    def consumed(self, position: int, capacity: int, segment_end: int | None = None) -> int:
        """w(p, c): tokens a graph of `capacity` launched at `position` processes."""
        e = self.segment_end(position) if segment_end is None else segment_end
        return self.cut(min(position + capacity, e)) - position

    def has_span_between(self, lo: int, hi: int) -> bool:
        """Whether an atomic span can cut a chunk ending in (lo, hi]."""
        i = bisect_left(self._span_starts, hi)
        return i > 0 and self.atomic_spans[i - 1][1] > lo + 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "message_boundaries": list(self.message_boundaries),
            "atomic_spans": [list(s) for s in self.atomic_spans],
            "prefill_limit": self.prefill_limit,
        }

    @classmethod
    def parse(cls, data: Any, catalog: Catalog | None = None, field_name: str = "request") -> Request:
        """Validate a JSON request; with a catalog, also reject spans no chunk could ever hold."""
        data = require_mapping(data, field_name)
        reject_unknown_keys(data, {"prompt_tokens", "message_boundaries", "atomic_spans", "prefill_limit"}, field_name)
        if "prompt_tokens" not in data:
            raise InvalidInput(f"{field_name}.prompt_tokens", "is required")
        n = require_int(data["prompt_tokens"], f"{field_name}.prompt_tokens", minimum=1, maximum=MAX_TOKENS)

        boundaries: list[int] = []
        for i, b in enumerate(require_list(data.get("message_boundaries", []), f"{field_name}.message_boundaries")):
            f = f"{field_name}.message_boundaries[{i}]"
            require_int(b, f, minimum=1, maximum=n - 1)
            if boundaries and b <= boundaries[-1]:
                raise InvalidInput(f, f"must be strictly increasing ({b} after {boundaries[-1]})")
            boundaries.append(b)

        spans: list[tuple[int, int]] = []
        for i, span in enumerate(require_list(data.get("atomic_spans", []), f"{field_name}.atomic_spans")):
            f = f"{field_name}.atomic_spans[{i}]"
            pair = require_list(span, f)
            if len(pair) != 2:
                raise InvalidInput(f, f"must be a [start, end) pair, got {len(pair)} values")
            start = require_int(pair[0], f"{f}.start", minimum=0)
            end = require_int(pair[1], f"{f}.end", maximum=n)
            if start >= end:
                raise InvalidInput(f, f"start {start} must be < end {end}")
            if spans and start < spans[-1][1]:
                raise InvalidInput(
                    f, f"overlaps or precedes the previous span {list(spans[-1])}; spans must be sorted and disjoint"
                )
            if catalog is not None and end - start > catalog.full_chunk:
                raise InvalidInput(
                    f,
                    f"is {end - start} tokens, longer than the full chunk {catalog.full_chunk}: it could never be scheduled",
                )
            spans.append((start, end))

        for i, b in enumerate(boundaries):
            for start, end in spans:
                if start < b < end:
                    raise InvalidInput(
                        f"{field_name}.message_boundaries[{i}]",
                        f"boundary {b} lies strictly inside atomic span [{start}, {end})",
                    )

        limit = data.get("prefill_limit")
        if limit is not None:
            limit = require_int(limit, f"{field_name}.prefill_limit", minimum=0, maximum=n)
        return cls(n, tuple(boundaries), tuple(spans), limit)
