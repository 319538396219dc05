"""Counterfactual replay: what each policy would have done with the traffic an engine served.

The traffic is the engine's own request records rebuilt into arrivals
(`traffic.from_engine_requests`), or any trace, run under every chosen policy on one setting as
`simulate` runs a trace. The result adds what `simulate` cannot know: `served`, what the engine
reported per policy it ran, and `reproduction`, the share of those requests each replay repeats
launch for launch (1.0: the replay's setting is the engine's; less: the engine's true costs differ,
and the counterfactual is read against that gap). The replay starts idle, so the first requests
may queue less than they did. `docs/analyses.md` describes each field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypedDict

from .. import saturation
from ..comparison import Pair, default_pair, request_deltas
from ..errors import InvalidInput
from ..events import PolicyResultEvent, ProgressEvent
from ..limits import MAX_TOKENS
from ..reading import loads, read_lines
from ..scheduler import SchedulerConfig, ScheduleResult, schedule
from ..stats import percentiles
from ..traffic import TraceTraffic, from_engine_requests
from ..validation import require_int, require_list, require_mapping, require_number
from . import simulate
from .catalogs import boot_or_profile_schema
from .contract import Analysis, Emit, Param
from .pacing import Ticker
from .params import EXAMPLE_TRACE, PolicyListParam, TraceParam

MAX_REQUESTS = 20_000  # requests replayed in one run (simulate's bound on a run's requests)
MAX_NAME = 64
NO_NUL = "^[^\\u0000]*$"  # text a database stores (`validation.text_problem`)
MAX_RECORD_CHARS = 1 << 20  # one JSON Lines row of a replay's records (its launches: a few KB)
DETERMINISTIC = "none: a trace on a fixed setting is deterministic, so each policy runs once and a rerun gives the same"


@dataclass(frozen=True)
class Served:
    """What the engine reported of one request: the policy it finished under, its TTFT, its prefill
    launches' graphs (capacities, in order; the record's `launches`) and the engine that served it."""

    policy: str
    ttft_ms: float
    graphs: tuple[int, ...]
    engine: str = ""

    def padded_tokens(self, prompt_tokens: int) -> int:
        """The chunks tile the prompt, so the padding is the capacities launched beyond it."""
        return sum(self.graphs) - prompt_tokens

    def to_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {"policy": self.policy, "ttft_ms": self.ttft_ms, "launches": list(self.graphs)}
        return row | ({"engine": self.engine} if self.engine else {})


@dataclass(frozen=True)
class ServedParam(Param):
    """What the engine reported per request, in the trace's row order (row i is the trace's request
    with id i): `{policy, ttft_ms, launches, engine?}` each. The CLI reads a JSON Lines file."""

    kind: ClassVar[str] = "served"
    metavar: ClassVar[str] = "FILE"

    def parse(self, value: Any) -> tuple[Served, ...] | None:
        if value is None:
            return None
        rows = require_list(value, self.name)
        if len(rows) > MAX_REQUESTS:
            raise InvalidInput(self.name, f"has {len(rows):,} rows, at most {MAX_REQUESTS:,}")
        return tuple(_served(row, f"{self.name}[{i}]") for i, row in enumerate(rows))

    def from_text(self, text: str) -> Any:
        path = text.strip()
        rows = []
        for n, line in enumerate(read_lines(path, self.name, MAX_RECORD_CHARS), 1):
            if len(line) > MAX_RECORD_CHARS:
                raise InvalidInput(f"{self.name}: line {n}", f"is longer than {MAX_RECORD_CHARS:,} characters")
            if line.strip():
                rows.append(loads(line, f"{self.name}: line {n}"))
            if len(rows) > MAX_REQUESTS:  # parse refuses it by its count; read no further
                break
        return rows

    def to_json(self, value: Any) -> list[dict[str, Any]] | None:
        return None if value is None else [s.to_dict() for s in value]

    def from_json(self, value: Any) -> tuple[Served, ...] | None:
        return self.parse(value)

    def cli_help(self) -> str:
        return f"{self.help} (a JSON Lines file)"

    def json_schema(self) -> dict[str, Any]:
        return {
            "type": "array",
            "maxItems": MAX_REQUESTS,
            "items": {
                "type": "object",
                "properties": {
                    "policy": {"type": "string", "maxLength": MAX_NAME, "pattern": NO_NUL},
                    "ttft_ms": {"type": "number", "minimum": 0},
                    "launches": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": MAX_TOKENS}},
                    "engine": {"type": "string", "maxLength": MAX_NAME, "pattern": NO_NUL},
                },
                "required": ["policy", "ttft_ms", "launches"],
                "additionalProperties": False,
            },
        }


@dataclass(frozen=True)
class RowOrderTraceParam(TraceParam):
    """A trace stored in its rows' own order (not by arrival, as `TraceParam` stores it), so a
    stored replay's `served` row i is still the request with id i when the job reads it back."""

    def to_json(self, value: Any) -> list[dict[str, Any]] | None:
        if value is None:
            return None
        return [row for _, row in sorted(zip(value.ids, value.records()), key=lambda pair: pair[0])]


def _served(row: Any, field: str) -> Served:
    if isinstance(row, Served):
        return row
    data = require_mapping(row, field)
    unknown = sorted(set(data) - {"policy", "ttft_ms", "launches", "engine"})
    if unknown:
        raise InvalidInput(f"{field}.{unknown[0]}", "unknown field (expected policy, ttft_ms, launches, engine)")
    for key in ("policy", "ttft_ms", "launches"):
        if key not in data:
            raise InvalidInput(f"{field}.{key}", "is required")
    names = {k: data.get(k, "") for k in ("policy", "engine")}
    for key, name in names.items():
        if not isinstance(name, str) or len(name) > MAX_NAME:
            raise InvalidInput(f"{field}.{key}", f"must be a name of at most {MAX_NAME} characters")
    graphs = tuple(
        require_int(g, f"{field}.launches[]", minimum=1, maximum=MAX_TOKENS)
        for g in require_list(data["launches"], f"{field}.launches")
    )
    ttft = require_number(data["ttft_ms"], f"{field}.ttft_ms", minimum=0.0)
    return Served(names["policy"], ttft, graphs, names["engine"])


def from_engine_records(
    records: Sequence[Mapping[str, Any]], engines: Sequence[str] = (), *, field: str = "records"
) -> tuple[TraceTraffic, tuple[Served, ...]]:
    """The traffic an engine served and what it reported of each request, from its request records
    (the telemetry an engine posts; `engines[i]` names the engine of record i where known)."""
    trace = from_engine_requests(records, field=field)
    served = tuple(
        _served(
            {"policy": r.get("policy", ""), "ttft_ms": r["ttft_ms"], "launches": r.get("launches", [])}
            | ({"engine": engines[i]} if i < len(engines) else {}),
            f"{field}[{i}]",
        )
        for i, r in enumerate(records)
    )
    return trace, served


def check(params: dict[str, Any]) -> None:
    """The setting's rules (simulate's); `served` row for row with the trace (`required`)."""
    trace: TraceTraffic = params["trace"]
    simulate.check({**_simulate_defaults(), **params})
    served = params["served"]
    if served is not None and len(served) != len(trace):
        raise InvalidInput("served", f"has {len(served):,} rows for {len(trace):,} requests: one per request")


def work(params: dict[str, Any]) -> int:
    return simulate.work({**_simulate_defaults(), **params})


def _simulate_defaults() -> dict[str, Any]:
    """simulate's traffic parameters as a replay fixes them: the whole trace, at its own pace."""
    return {p.name: p.default_value() for p in simulate.ANALYSIS.params} | {"launch_events": 0}


class ReplayResult(TypedDict):
    """Each policy's figures on the replayed traffic (as `simulate`'s, with its per-request deltas),
    the comparison `table`, what the engine `served` and how much of it each policy `reproduction`
    repeats launch for launch; always deterministic (a trace on a fixed execution model)."""

    execution: dict[str, Any]
    catalog: str
    traffic: dict[str, Any]
    requests: int
    offered_ms: float
    deterministic: bool
    randomness: str
    table: list[dict[str, Any]]
    served: dict[str, Any] | None
    reproduction: list[dict[str, Any]]
    policies: list[dict[str, Any]]
    deltas: dict[str, Any] | None


def run(params: dict[str, Any], emit: Emit) -> ReplayResult:
    execution, catalog, catalog_name, described = simulate.setting(params)
    trace: TraceTraffic = params["trace"]
    arrivals = list(trace.arrivals())
    n = len(arrivals)
    ticker = Ticker(emit, n * len(params["policies"]))
    policies, reproduction = [], []
    served: tuple[Served, ...] | None = params["served"]
    for i, name in enumerate(params["policies"]):

        def on_progress(finished: int, launch_count: int, before: int = i * n, name: str = name) -> None:
            ticker.tick(before + finished, f"{name}: {finished}/{n} requests, {launch_count} launches")

        result = schedule(
            arrivals,
            catalog,
            execution,
            SchedulerConfig(name, params["max_lanes"], params["max_decode_wait"]),
            on_progress,
        )
        summary = simulate.summarise(result, arrivals)
        emit({"type": "policy_result", **{k: v for k, v in summary.items() if k != "per_request"}})
        ticker.tick((i + 1) * n, f"{name} done")
        policies.append(summary)
        if served is not None and any(s.policy == name for s in served):
            reproduction.append(_reproduction(name, result, served))
    return {
        "execution": described,
        "catalog": catalog_name,
        "traffic": {"source": "trace", "name": trace.name, "format": trace.format, "trace_requests": n},
        "requests": n,
        "offered_ms": round(arrivals[-1].arrival_ms, 6) if arrivals else 0.0,
        "deterministic": True,
        "randomness": DETERMINISTIC,
        "table": [_row(p["policy"], p) for p in policies],
        "served": None if served is None else _served_summary(served, trace),
        "reproduction": reproduction,
        "policies": policies,
        "deltas": request_deltas(policies, default_pair(params["policies"])),
    }


def _row(label: str, p: Mapping[str, Any]) -> dict[str, Any]:
    """One line of the comparison: TTFT p50/p99, prefill launches, padded prefill tokens."""
    return {
        "policy": label,
        "requests": p["finished"],
        "ttft_p50_ms": p["ttft_ms"]["p50"],
        "ttft_p99_ms": p["ttft_ms"]["p99"],
        "prefill_launches": p["launches"].get("prefill", 0) + p["launches"].get("mixed", 0),
        "padded_prefill_tokens": p["padded_prefill_tokens"],
        "stalled": p["stalled"] is not None,
        **_load(p),
    }


def _load(p: Mapping[str, Any]) -> dict[str, Any]:
    """The run's load verdict (`saturation`) as a row states it; empty for a result older than it."""
    load = p.get("load")
    if not load:
        return {}
    return {
        "overloaded": load["overloaded"],
        "offered_per_s": load["offered_per_s"],
        "sustained_per_s": load["sustained_per_s"],
    }


def _served_summary(served: Sequence[Served], trace: TraceTraffic) -> dict[str, Any]:
    """What the engine reported, per policy it ran: the same figures as each replayed policy's."""
    prompt = dict(zip(trace.ids, trace.prompt_tokens))
    by_policy: dict[str, list[int]] = {}
    for i, s in enumerate(served):
        by_policy.setdefault(s.policy, []).append(i)
    rows = []
    for policy, ids in by_policy.items():
        ttft = percentiles([served[i].ttft_ms for i in ids])
        rows.append(
            {
                "policy": policy,
                "requests": len(ids),
                "ttft_p50_ms": ttft["p50"],
                "ttft_p99_ms": ttft["p99"],
                "prefill_launches": sum(len(served[i].graphs) for i in ids),
                "padded_prefill_tokens": sum(served[i].padded_tokens(prompt[i]) for i in ids),
            }
        )
    return {"engines": sorted({s.engine for s in served if s.engine}), "policies": rows}


def _reproduction(policy: str, result: ScheduleResult, served: Sequence[Served]) -> dict[str, Any]:
    """How closely the replay under `policy` repeats what the engine did under it: the share of
    those requests whose replayed prefill launches equal the served ones, and the largest TTFT gap."""
    lanes = {lane.id: lane for lane in result.lanes}
    ids = [i for i, s in enumerate(served) if s.policy == policy and i in lanes]
    same = sum(1 for i in ids if tuple(c.graph for c in lanes[i].chunks) == served[i].graphs)
    gap = max((abs(lanes[i].ttft_ms - served[i].ttft_ms) for i in ids), default=0.0)
    return {
        "policy": policy,
        "requests": len(ids),
        "same_launches": same,
        "same_launches_share": round(same / len(ids), 6) if ids else None,
        "ttft_max_gap_ms": round(gap, 6),
    }


def comparison_rows(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The replayed policies' rows, then what the engine served under each policy (`served <policy>`)."""
    served = (result.get("served") or {}).get("policies", [])
    return [*result["table"], *({**r, "policy": f"served {r['policy']}"} for r in served)]


def format_text(result: ReplayResult, pair: Pair | None = None) -> str:
    """A line per replayed policy and per policy the engine served under, then the reproduction
    and `pair`'s deltas (by default the first two policies')."""
    lines = [
        f"{result['requests']} requests replayed on the {result['catalog']} catalog; randomness: {result['randomness']}"
    ]
    for row in comparison_rows(result):
        lines.append(
            f"{row['policy']:<14} ttft p50 {row['ttft_p50_ms'] or 0:.2f} p99 {row['ttft_p99_ms'] or 0:.2f} ms  "
            f"prefill launches {row['prefill_launches']}  padded {row['padded_prefill_tokens']} tokens"
        )
    for r in result["reproduction"]:
        lines.append(
            f"replayed {r['policy']} repeats the engine's launches for {r['same_launches']}/{r['requests']} requests "
            f"(TTFT within {r['ttft_max_gap_ms']:.3f} ms)"
        )
    for p in result["policies"]:
        if p.get("load"):
            lines.append(f"{p['policy']:<14} {saturation.Load(**p['load']).describe()}")
    lines += simulate.delta_lines(simulate.picked_deltas(result, pair))
    return "\n".join(lines)


ANALYSIS = Analysis(
    name="replay",
    summary="Counterfactual replay: the traffic an engine served (its request records, or a trace) under each "
    "policy on a boot or an execution profile, beside what the engine reported; deterministic.",
    params=(
        RowOrderTraceParam(
            "trace", None, "the traffic to replay: the engine's requests rebuilt, or a trace", max_inline=MAX_REQUESTS
        ),
        ServedParam("served", None, "what the engine reported per request, in the trace's row order"),
        PolicyListParam("policies", help="policies to replay the traffic under"),
        *(simulate.SHARED[name] for name in (*simulate.SETTING, "boot_catalog")),
    ),
    run=run,
    required=("trace",),
    schema_rules=(boot_or_profile_schema("boot_catalog"),),
    check=check,
    work=work,
    max_work=simulate.ANALYSIS.max_work,
    format_text=format_text,
    pair_text=format_text,
    events=(ProgressEvent, PolicyResultEvent),
    result=ReplayResult,
    example={"trace": EXAMPLE_TRACE},
)
