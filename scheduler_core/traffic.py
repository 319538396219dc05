"""Traffic for every analysis: one stream of `Arrival`s, from seeded Poisson draws or from a trace.

A trace is real traffic (arrival time, prompt tokens, output tokens) read from the Azure LLM
inference trace's CSV (`TIMESTAMP,ContextTokens,GeneratedTokens`), from JSON Lines (`arrival_ms`,
`prompt_tokens`, `output_tokens`, optional `atomic_spans` and `message_boundaries`), or from a
list of request dicts of the same fields (requests rebuilt from engine telemetry). It is held in
compact arrays sorted by arrival (32 bytes a request), so a trace of `MAX_TRACE_ROWS`
requests parses and summarises in bounded memory; `Arrival` objects are made only for the
requests a run takes. A bad row is refused as a `TraceError` naming its line and column.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from .errors import InvalidInput
from .limits import MAX_TOKENS  # a prompt's or an output's tokens
from .reading import loads as json_loads
from .reading import read_lines
from .request import Request
from .scheduler import Arrival
from .stats import percentiles, quantiles, round6

MAX_TRACE_ROWS = 2_000_000  # requests in one trace
MAX_LINE_CHARS = 65_536  # one row, spans and boundaries included
MAX_ARRIVAL_MS = 1e11  # about 3 years after the first request
MAX_BINS = 1_440  # arrivals-per-interval points in a summary (a day of minutes; longer traces widen the bin)

AZURE_COLUMNS: tuple[str, ...] = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
JSONL_FIELDS: frozenset[str] = frozenset(
    {"arrival_ms", "prompt_tokens", "output_tokens", "atomic_spans", "message_boundaries"}
)
FORMATS: tuple[str, ...] = ("azure-csv", "jsonl")
_TIMESTAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?")


class TraceError(InvalidInput):
    """A row of a trace that cannot be read: `line` (1-based, the header is line 1 of a CSV) and
    `column` (the CSV column's or JSON field's name) say where."""

    def __init__(self, field: str, line: int, column: str | None, message: str) -> None:
        where = f"line {line}" + (f", column {column}" if column else "")
        super().__init__(field, f"{where}: {message}")
        self.line, self.column = line, column


@dataclass(frozen=True, eq=False)
class TraceTraffic:
    """A parsed trace, sorted by arrival (ties in file order), the first request at 0 ms.

    `ids` are the requests' 0-based positions among the source's rows (file order), so a result's
    request can be traced back to its line. `shapes` holds the spans and boundaries of the few
    requests that have them, by sorted position."""

    name: str
    format: str
    arrival_ms: array[float]
    prompt_tokens: array[int]
    output_tokens: array[int]
    ids: array[int]
    shapes: dict[int, tuple[tuple[int, ...], tuple[tuple[int, int], ...]]] = field(default_factory=dict)
    time_scale: float = 1.0

    def __len__(self) -> int:
        return len(self.arrival_ms)

    def select(
        self, window_s: tuple[float, float] | None = None, limit: int = 0, time_scale: float = 1.0
    ) -> TraceTraffic:
        """The requests arriving in `window_s` = [start, end) seconds of this trace's clock, then the
        first `limit` of them (0: all), their clock shifted to start at 0 and every gap times
        `time_scale` (2.0: half the rate)."""
        lo, hi = 0, len(self)
        if window_s is not None:
            lo = bisect_left(self.arrival_ms, window_s[0] * 1000.0)
            hi = bisect_left(self.arrival_ms, window_s[1] * 1000.0)
        if limit:
            hi = min(hi, lo + limit)
        origin = self.arrival_ms[lo] if lo < hi else 0.0
        return TraceTraffic(
            self.name,
            self.format,
            array("d", ((t - origin) * time_scale for t in self.arrival_ms[lo:hi])),
            self.prompt_tokens[lo:hi],
            self.output_tokens[lo:hi],
            self.ids[lo:hi],
            {i - lo: s for i, s in self.shapes.items() if lo <= i < hi},
            self.time_scale * time_scale,
        )

    def arrivals(self) -> Iterator[Arrival]:
        """The requests as the scheduler takes them, in arrival order."""
        shapes = self.shapes
        for i, (t, prompt, output, rid) in enumerate(
            zip(self.arrival_ms, self.prompt_tokens, self.output_tokens, self.ids)
        ):
            boundaries, spans = shapes.get(i, ((), ()))
            yield Arrival(rid, t, Request(prompt, boundaries, spans), output)

    def records(self) -> list[dict[str, Any]]:
        """The trace as request dicts (what `from_records` reads back): a job's stored params."""
        out = []
        for i, a in enumerate(self.arrivals()):
            row: dict[str, Any] = {
                "arrival_ms": a.arrival_ms,
                "prompt_tokens": a.request.prompt_tokens,
                "output_tokens": a.output_tokens,
            }
            if i in self.shapes:
                row["message_boundaries"] = list(a.request.message_boundaries)
                row["atomic_spans"] = [list(s) for s in a.request.atomic_spans]
            out.append(row)
        return out

    def rate_per_s(self) -> float | None:
        """Requests per second over the trace's span (None with fewer than two distinct times)."""
        span = self.arrival_ms[-1] - self.arrival_ms[0] if len(self) else 0.0
        return len(self) / (span / 1000.0) if span > 0 else None


# ---- reading ---------------------------------------------------------------------------------


def parse_trace(
    source: str | bytes | Iterable[str],
    *,
    name: str = "trace",
    fmt: str | None = None,
    field: str = "trace",
    loads: Callable[[str], Any] | None = None,
) -> TraceTraffic:
    """A trace from its text, its bytes (UTF-8, a byte-order mark allowed) or an iterable of lines
    (an open text file). `fmt` is `azure-csv` or `jsonl`; None tells them apart by the first line
    (`{` starts JSON Lines). `loads` reads one JSON Lines row (InvalidInput for a bad one; the web
    passes the bounded reader its bodies go through). Raises TraceError (a bad row, naming line and
    column) or InvalidInput (an empty trace, too many rows, an unknown format) with `field` as the field."""
    if fmt is not None and fmt not in FORMATS:
        raise InvalidInput(field, f"unknown trace format {fmt!r} (expected one of {list(FORMATS)})")
    if isinstance(source, bytes):
        try:
            text = source.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = source[: exc.start].count(b"\n") + 1
            raise TraceError(field, line, None, "is not UTF-8 text") from None
        source = text
    lines: Iterator[str] = iter(source.splitlines() if isinstance(source, str) else source)
    numbered = _numbered(lines, field)
    first = next(numbered, None)
    if first is None:
        raise InvalidInput(field, "is empty: a trace needs at least one request")
    number, text = first
    kind = fmt or ("jsonl" if text.startswith("{") else "azure-csv")
    rows = itertools.chain([(number, text)], numbered)
    builder = _Builder(name, kind, field, loads or _read_row)
    if kind == "jsonl":
        for number, text in rows:
            builder.add_json(number, text)
    else:
        _read_azure(rows, builder, field)
    return builder.finish()


def read_trace(path: str, *, fmt: str | None = None, field: str = "trace") -> TraceTraffic:
    """A trace file, read line by line (never whole into memory, each line and the whole bounded)."""
    return parse_trace(read_lines(path, field, MAX_LINE_CHARS), name=path.rsplit("/", 1)[-1], fmt=fmt, field=field)


def from_records(records: Iterable[Mapping[str, Any]], *, name: str = "records", field: str = "trace") -> TraceTraffic:
    """A trace from request dicts (the JSON Lines fields); an error names `records[i].<field>`."""
    builder = _Builder(name, "records", field)
    for i, record in enumerate(records):
        builder.add_record(record, f"{field}[{i}]")
    return builder.finish()


def from_engine_requests(
    records: Iterable[Mapping[str, Any]], *, name: str = "telemetry", field: str = "records"
) -> TraceTraffic:
    """The traffic an engine served, rebuilt from its request records (`EngineLoop`'s, the telemetry
    an engine posts: `t_ms` when its last token came, `ttft_ms`, `itl_ms` its gaps, `prompt_tokens`):
    each request arrived at t_ms - sum(itl_ms) - ttft_ms and generated 1 + len(itl_ms) tokens. Spans
    and boundaries are not in the records, so the rebuilt requests have none."""
    rows = []
    for i, r in enumerate(records):
        f = f"{field}[{i}]"
        for key in ("t_ms", "ttft_ms", "itl_ms", "prompt_tokens"):
            if key not in r:
                raise InvalidInput(f"{f}.{key}", "is required")
        gaps = r["itl_ms"]
        if not isinstance(gaps, list) or not all(isinstance(g, (int, float)) and not isinstance(g, bool) for g in gaps):
            raise InvalidInput(f"{f}.itl_ms", "must be a list of numbers")
        try:
            arrival = float(r["t_ms"]) - math.fsum(gaps) - float(r["ttft_ms"])
        except (TypeError, ValueError):
            raise InvalidInput(f"{f}.t_ms", "t_ms and ttft_ms must be numbers") from None
        rows.append({"arrival_ms": arrival, "prompt_tokens": r["prompt_tokens"], "output_tokens": 1 + len(gaps)})
    if rows:  # the trace's clock is the engine's, shifted: keep the first arrival's offset out of the errors
        origin = min(row["arrival_ms"] for row in rows)
        for row in rows:
            row["arrival_ms"] = max(0.0, row["arrival_ms"] - origin)
    return from_records(rows, name=name, field=field)


def _read_row(text: str) -> Any:
    return json_loads(text, "row")


def _numbered(lines: Iterator[str], field: str) -> Iterator[tuple[int, str]]:
    """Non-blank lines with their 1-based numbers, line endings stripped, each bounded in length."""
    number = 0
    try:
        for number, raw in enumerate(lines, start=1):
            if len(raw) > MAX_LINE_CHARS:
                raise TraceError(field, number, None, f"is longer than {MAX_LINE_CHARS} characters")
            text = raw.rstrip("\r\n").lstrip("\ufeff") if number == 1 else raw.rstrip("\r\n")
            if text.strip():
                yield number, text
    except UnicodeDecodeError:
        raise TraceError(field, number + 1, None, "is not UTF-8 text") from None


def _read_azure(rows: Iterator[tuple[int, str]], builder: _Builder, field: str) -> None:
    number, header = next(rows)
    names = [h.strip() for h in header.split(",")]
    if sorted(names) != sorted(AZURE_COLUMNS):
        raise TraceError(
            field, number, None, f"the header must name the columns {list(AZURE_COLUMNS)}, got {header[:200]!r}"
        )
    t_col, p_col, o_col = (names.index(c) for c in AZURE_COLUMNS)
    days: dict[str, int] = {}
    origin: int | None = None  # the first row's time: ms relative to it keep all 7 digits in a float
    for number, text in rows:
        cells = text.split(",")
        if len(cells) != len(names):
            raise TraceError(field, number, None, f"has {len(cells)} columns, the header {len(names)}")
        ns = _timestamp_ns(cells[t_col].strip(), days, field, number)
        prompt = _count(cells[p_col], field, number, "ContextTokens")
        output = _count(cells[o_col], field, number, "GeneratedTokens")
        if origin is None:
            origin = ns
        builder.add((ns - origin) / 1e6, prompt, output, number)


def _timestamp_ns(text: str, days: dict[str, int], field: str, number: int) -> int:
    """`YYYY-MM-DD HH:MM:SS.fffffff` (up to 9 fractional digits) as integer nanoseconds since
    the epoch: integers, because float seconds lose the 7th digit at today's epoch."""
    m = _TIMESTAMP.fullmatch(text)
    if m is None:
        raise TraceError(field, number, "TIMESTAMP", f"must read YYYY-MM-DD HH:MM:SS.fffffff, got {text[:40]!r}")
    y, mo, d, h, mi, s, frac = m.groups()
    day_key = text[:10]
    day = days.get(day_key)
    if day is None:
        try:
            day = date(int(y), int(mo), int(d)).toordinal()
        except ValueError as exc:
            raise TraceError(field, number, "TIMESTAMP", f"{exc}: {text[:40]!r}") from None
        days[day_key] = day
    if int(h) > 23 or int(mi) > 59 or int(s) > 59:
        raise TraceError(field, number, "TIMESTAMP", f"has a time out of range: {text[:40]!r}")
    seconds = day * 86_400 + int(h) * 3600 + int(mi) * 60 + int(s)
    return seconds * 1_000_000_000 + (int(frac.ljust(9, "0")) if frac else 0)


def _count(cell: str, field: str, number: int, column: str) -> int:
    text = cell.strip()
    if not text.isdigit() or not text.isascii():
        raise TraceError(field, number, column, f"must be a whole number of tokens, got {cell[:40]!r}")
    value = int(text)
    if not 1 <= value <= MAX_TOKENS:
        raise TraceError(field, number, column, f"must be in [1, {MAX_TOKENS}], got {value}")
    return value


class _Builder:
    """Collects rows into arrays, then sorts them by arrival once."""

    def __init__(self, name: str, kind: str, field: str, loads: Callable[[str], Any] | None = None) -> None:
        # `loads` reads a JSON Lines row; records arrive as dicts and need none.
        self.name, self.kind, self.field = name, kind, field
        self.loads = loads
        self.times = array("d")
        self.prompts = array("q")
        self.outputs = array("q")
        self.shapes: dict[int, tuple[tuple[int, ...], tuple[tuple[int, int], ...]]] = {}  # by row index

    def add(self, t: float, prompt: int, output: int, number: int) -> None:
        if len(self.times) >= MAX_TRACE_ROWS:
            raise TraceError(self.field, number, None, f"a trace holds at most {MAX_TRACE_ROWS:,} requests")
        self.times.append(t)
        self.prompts.append(prompt)
        self.outputs.append(output)

    def add_json(self, number: int, text: str) -> None:
        try:
            data = (self.loads or _read_row)(text)
        except InvalidInput as exc:
            raise TraceError(self.field, number, None, exc.message) from None
        if not isinstance(data, dict):
            raise TraceError(self.field, number, None, f"must be a JSON object, got {type(data).__name__}")
        try:
            self.add_record(data, "")
        except TraceError:
            raise
        except InvalidInput as exc:
            raise TraceError(self.field, number, exc.field.lstrip("."), exc.message) from None

    def add_record(self, data: Mapping[str, Any], prefix: str) -> None:
        """One request dict; InvalidInput names `prefix.<field>` (or just the field without a prefix)."""

        def name(key: str) -> str:
            return f"{prefix}.{key}" if prefix else key

        if not isinstance(data, Mapping):
            raise InvalidInput(prefix or self.field, f"must be an object, got {type(data).__name__}")
        unknown = sorted(set(data) - JSONL_FIELDS)
        if unknown:
            raise InvalidInput(name(unknown[0]), f"unknown field (expected one of {sorted(JSONL_FIELDS)})")
        for key in ("arrival_ms", "prompt_tokens", "output_tokens"):
            if key not in data:
                raise InvalidInput(name(key), "is required")
        t = data["arrival_ms"]
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
            raise InvalidInput(name("arrival_ms"), f"must be a finite number, got {t!r}")
        if not 0 <= t <= MAX_ARRIVAL_MS:
            raise InvalidInput(name("arrival_ms"), f"must be in [0, {MAX_ARRIVAL_MS:g}], got {t}")
        shape = {k: data[k] for k in ("prompt_tokens", "atomic_spans", "message_boundaries") if k in data}
        request = Request.parse(shape, field_name=prefix)  # the one validation of spans and boundaries
        if request.prompt_tokens > MAX_TOKENS:
            raise InvalidInput(name("prompt_tokens"), f"must be <= {MAX_TOKENS}, got {request.prompt_tokens}")
        output = data["output_tokens"]
        if isinstance(output, bool) or not isinstance(output, int) or not 1 <= output <= MAX_TOKENS:
            raise InvalidInput(name("output_tokens"), f"must be an integer in [1, {MAX_TOKENS}], got {output!r}")
        if request.atomic_spans or request.message_boundaries:
            self.shapes[len(self.times)] = (request.message_boundaries, request.atomic_spans)
        self.add(float(t), request.prompt_tokens, output, len(self.times) + 1)

    def finish(self) -> TraceTraffic:
        n = len(self.times)
        if n == 0:
            raise InvalidInput(self.field, "holds no requests (only a header or blank lines)")
        times = self.times
        order = sorted(range(n), key=times.__getitem__)  # stable: ties keep file order
        origin = times[order[0]]
        position = {row: i for i, row in enumerate(order) if row in self.shapes} if self.shapes else {}
        return TraceTraffic(
            self.name,
            self.kind,
            array("d", (times[i] - origin for i in order)),
            array("q", (self.prompts[i] for i in order)),
            array("q", (self.outputs[i] for i in order)),
            array("q", order),
            {position[row]: s for row, s in self.shapes.items()},
        )


# ---- Poisson ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrafficShape:
    """Continuous synthetic traffic: Poisson arrivals at `rate_per_s`, log-uniform prompt lengths,
    uniform output lengths, and a share of requests holding one atomic span no longer than the
    full chunk."""

    rate_per_s: float
    prompt_min: int
    prompt_max: int
    output_min: int
    output_max: int
    span_share: float = 0.0
    seed: int = 0


def poisson_arrivals(shape: TrafficShape, full_chunk: int) -> Iterator[Arrival]:
    """An endless, seeded stream of arrivals in time order (`simulate` takes its first N, the
    simulated engine all of them)."""
    rng = random.Random(shape.seed)
    log_low, log_high = math.log(shape.prompt_min), math.log(shape.prompt_max)
    clock, i = 0.0, 0
    while True:
        clock += rng.expovariate(shape.rate_per_s) * 1000.0
        n = max(1, min(shape.prompt_max, round(math.exp(rng.uniform(log_low, log_high)))))
        spans: tuple[tuple[int, int], ...] = ()
        if rng.random() < shape.span_share:
            length = rng.randint(1, min(n, full_chunk))
            start = rng.randint(0, n - length)
            spans = ((start, start + length),)
        output = rng.randint(shape.output_min, shape.output_max)
        yield Arrival(i, clock, Request(n, (), spans), output)
        i += 1


def looped(trace: TraceTraffic) -> Iterator[Arrival]:
    """A trace replayed endlessly (the simulated engine's traffic): each pass starts one mean gap
    after the previous pass's last arrival, so the rate holds across the seam; ids keep counting."""
    n = len(trace)
    if not n:
        return
    span = trace.arrival_ms[-1]
    gap = span / (n - 1) if n > 1 and span > 0 else 1000.0
    offset, i = 0.0, 0
    while True:
        for a in trace.arrivals():
            yield Arrival(i, offset + a.arrival_ms, a.request, a.output_tokens)
            i += 1
        offset += span + gap


# ---- summary ---------------------------------------------------------------------------------


def summarise_trace(trace: TraceTraffic, full_chunk: int = 4096) -> dict[str, Any]:
    """The trace's figures as plain JSON (what the web stores beside a trace): requests, span, mean
    and peak-minute rate, prompt and output token percentiles, the share of prompts longer than
    the full chunk, arrivals per interval and both token CDFs (101 points each)."""
    n = len(trace)
    times = trace.arrival_ms
    span_ms = times[-1] - times[0] if n else 0.0
    per_minute: dict[int, int] = {}
    for t in times:
        minute = int(t // 60_000)
        per_minute[minute] = per_minute.get(minute, 0) + 1
    peak = max(per_minute.values()) if per_minute else 0
    bin_minutes = max(1, math.ceil((int(span_ms // 60_000) + 1) / MAX_BINS))
    bins = [0] * (int(span_ms // 60_000) // bin_minutes + 1)
    for minute, count in per_minute.items():
        bins[minute // bin_minutes] += count
    prompts, outputs = sorted(trace.prompt_tokens), sorted(trace.output_tokens)
    return {
        "name": trace.name,
        "format": trace.format,
        "requests": n,
        "span_s": round6(span_ms / 1000.0),
        "mean_rate_per_s": None if span_ms <= 0 else round6(n / (span_ms / 1000.0)),
        "peak_minute_requests": peak,
        "peak_minute_rate_per_s": round6(peak / 60.0),
        "prompt_tokens": {**percentiles(prompts, ordered=True), "mean": round6(sum(prompts) / n)},
        "output_tokens": {**percentiles(outputs, ordered=True), "mean": round6(sum(outputs) / n)},
        "full_chunk": full_chunk,
        "share_over_full_chunk": round6(sum(1 for p in prompts if p > full_chunk) / n),
        "with_spans_or_boundaries": len(trace.shapes),
        "arrivals": {"bin_s": bin_minutes * 60, "counts": bins},
        "prompt_cdf": quantiles(prompts, ordered=True),
        "output_cdf": quantiles(outputs, ordered=True),
    }


def format_summary(summary: Mapping[str, Any]) -> str:
    """The summary as the CLI prints it."""
    p, o = summary["prompt_tokens"], summary["output_tokens"]
    rate = summary["mean_rate_per_s"]
    rows = [
        f"{summary['name']} ({summary['format']}): {summary['requests']:,} requests over {summary['span_s']:,.1f} s",
        f"rate      mean {'-' if rate is None else f'{rate:.3f}'}/s, peak minute "
        f"{summary['peak_minute_requests']} requests ({summary['peak_minute_rate_per_s']:.3f}/s)",
        f"prompt    p50 {p['p50']:,.0f}  p90 {p['p90']:,.0f}  p99 {p['p99']:,.0f}  max {p['max']:,.0f} tokens",
        f"output    p50 {o['p50']:,.0f}  p90 {o['p90']:,.0f}  p99 {o['p99']:,.0f}  max {o['max']:,.0f} tokens",
        f"longer than the full chunk ({summary['full_chunk']}): {summary['share_over_full_chunk']:.1%} of prompts",
    ]
    return "\n".join(rows)


def work_units(arrivals: Sequence[Arrival] | TraceTraffic, full_chunk: int = 1024) -> int:
    """What a loop run over this traffic costs, per policy: a unit per output token and per chunk."""
    if isinstance(arrivals, TraceTraffic):
        return int(sum(arrivals.output_tokens) + sum(arrivals.prompt_tokens) // full_chunk + 2 * len(arrivals))
    return sum(a.output_tokens + a.request.prompt_tokens // full_chunk + 2 for a in arrivals)
