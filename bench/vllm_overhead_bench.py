"""What the helios-vllm plugin costs a real vLLM: the same trace at 1, 8 and 32 concurrent requests,
served by two engines started side by side in one run, vLLM's own `Scheduler` and
`HeliosScheduler`, their runs interleaved (A B, then B A) so both see the same host load.
Prints, per level, each arm's wall time and mean step time, the A/B overhead (the ratio of wall
times over the same work), and the plugin's own time on the step path (the time `HeliosScheduler`
spends in its own code each step, read from the engine between levels) as a share of the step;
both against the target (<= 2 %).

Run in vLLM's virtualenv (clients/vllm/README.md). The plugin follows `vllm_loop.standin` (the
product's engine routes in this process, policy `rule`) unless HELIOS_URL, HELIOS_RECIPE and
HELIOS_TOKEN name a running product whose recipe runs `rule`. On the CPU, with the full chunk equal
to `max_num_batched_tokens`, `rule` chunks a solo prefill exactly as vLLM does, so both engines
run the same steps and the difference is the plugin's own cost (planning, records, the reporter's
queue). The engines run in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`), which is how the
plugin's scheduler, and its step count, can be read.

    PYTHONPATH=var/vllm-site/<digest> VLLM_CPU_KVCACHE_SPACE=1 \\
        ~/.cache/helios/vllm/<key>/bin/python bench/vllm_overhead_bench.py  # both: python -m vllm_loop.venv

Prompts: the first requests of /work/shared/data/traces/azure-llm-2023-code.csv (ContextTokens,
GeneratedTokens), prompt lengths scaled so the longest fits the tiny model's context, outputs
capped at --max-output. A level of c concurrent requests is served as waves of c prompts
(`LLM.generate` of c at once).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from helios_vllm.models import CPU_ENGINE_ARGS, write

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # vllm_loop.standin: standard library only
from vllm_loop.standin import RECIPE, Standin

TRACE = Path("/work/shared/data/traces/azure-llm-2023-code.csv")
TARGET_PCT = 2.0


def trace(path: Path, count: int, longest: int, max_output: int) -> list[tuple[int, int]]:
    """(prompt tokens, output tokens) of the trace's first `count` requests, scaled to `longest`."""
    with path.open() as f:
        rows = [(int(r["ContextTokens"]), int(r["GeneratedTokens"])) for _, r in zip(range(count), csv.DictReader(f))]
    scale = min(1.0, longest / max(p for p, _ in rows))
    return [(max(1, round(p * scale)), max(1, min(o, max_output))) for p, o in rows]


def plugin(llm):
    """The plugin's step-path state in `llm`'s in-process engine: `steps` and `spent_s` so far."""
    return llm.llm_engine.engine_core.engine_core.scheduler._helios


def serve(llm, requests: list[tuple[int, int]], concurrency: int, seed: int, counted) -> tuple[float, int, float]:
    """Serve `requests` in waves of `concurrency` on `llm`: (wall seconds, and the steps made and
    seconds spent in its own code by `counted`, the plugin)."""
    from vllm import SamplingParams

    rng = random.Random(seed)  # the same token ids for both arms; distinct per request (no cache hits)
    prompts = [[rng.randrange(1, 32000) for _ in range(p)] for p, _ in requests]
    before = (counted.steps, counted.spent_s)
    start = time.perf_counter()
    for i in range(0, len(requests), concurrency):
        wave = range(i, min(i + concurrency, len(requests)))
        llm.generate(
            [{"prompt_token_ids": prompts[j]} for j in wave],
            [SamplingParams(max_tokens=requests[j][1], ignore_eos=True, detokenize=False) for j in wave],
            use_tqdm=False,
        )
    return time.perf_counter() - start, counted.steps - before[0], counted.spent_s - before[1]


def policy_in_force(standin: Standin | None) -> str:
    if standin is not None:
        return f"{standin.policy} (version {standin.version}, the stand-in)"
    url = f"{os.environ['HELIOS_URL']}/api/recipes/{os.environ['HELIOS_RECIPE']}/policy"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {os.environ['HELIOS_TOKEN']}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        body = json.load(answer)
    return f"{body['policy']} (version {body['version']}, {os.environ['HELIOS_URL']})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--levels", default="1,8,32")
    parser.add_argument("--requests", type=int, default=64, help="requests per level (and per arm, per round)")
    parser.add_argument("--rounds", type=int, default=2, help="A-B rounds per level (the order alternates)")
    parser.add_argument("--longest", type=int, default=4000, help="the longest prompt after scaling")
    parser.add_argument("--max-output", type=int, default=16)
    parser.add_argument(
        "--helios-only", action="store_true", help="start only the plugin's engine (its own time per step alone)"
    )
    args = parser.parse_args()
    standin = None
    if not os.environ.get("HELIOS_URL"):
        standin = Standin("rule")
        os.environ.update(HELIOS_URL=standin.url, HELIOS_RECIPE=RECIPE, HELIOS_TOKEN="standin", HELIOS_ENGINE="bench")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engines in this process: the plugin readable
    from vllm import LLM

    model = str(write(Path(tempfile.mkdtemp(prefix="helios-tiny-llama-")), "tiny"))
    common = dict(CPU_ENGINE_ARGS, gpu_memory_utilization=0.1)
    arms = {} if args.helios_only else {"vllm": LLM(model=model, **common)}
    arms["helios"] = LLM(model=model, scheduler_cls="helios_vllm.scheduler.HeliosScheduler", **common)
    counted = plugin(arms["helios"])
    requests = trace(args.trace, args.requests, args.longest, args.max_output)
    for llm in arms.values():  # compiles, and the plugin's calibration, before any timing
        serve(llm, requests[:4], 4, seed=0, counted=counted)
    load_before = os.getloadavg()
    print(
        f"policy in force: {policy_in_force(standin)}; {len(requests)} requests per level, prompts "
        f"{min(p for p, _ in requests)}-{max(p for p, _ in requests)} tokens (mean "
        f"{statistics.mean(p for p, _ in requests):.0f}), outputs <= {args.max_output}; {args.rounds} rounds"
    )
    print(
        f"{'level':>5} {'arm':>7} {'steps':>6} {'wall s':>8} {'mean step ms':>13} {'A/B':>9} {'own us/step':>12} {'own share':>10}"
    )
    worst_ab, worst_own = -float("inf"), 0.0
    for level in (int(x) for x in args.levels.split(",")):
        taken: dict[str, list[tuple[float, int, float]]] = {name: [] for name in arms}
        for r in range(args.rounds):
            order = list(arms) if r % 2 == 0 else list(reversed(arms))
            for name in order:
                # new token ids each round (a repeated prompt would be served from the prefix cache),
                # the same for both engines
                taken[name].append(serve(arms[name], requests, level, seed=level * 1000 + r, counted=counted))
        count = sum(n for _, n, _ in taken["helios"])  # the plugin's engine's steps (the same work on both)
        own_s = sum(s for _, _, s in taken["helios"])
        means = {name: sum(w for w, _, _ in runs) / count * 1000 for name, runs in taken.items()}
        own_share = own_s / sum(w for w, _, _ in taken["helios"]) * 100
        worst_own = max(worst_own, own_share)
        for name in arms:
            ab = ""
            if name == "helios" and "vllm" in means:
                ab = f"{(means['helios'] / means['vllm'] - 1) * 100:+.2f} %"
                worst_ab = max(worst_ab, (means["helios"] / means["vllm"] - 1) * 100)
            own = f"{own_s / count * 1e6:>12.1f} {own_share:>8.3f} %" if name == "helios" else ""
            print(
                f"{level:>5} {name:>7} {count:>6} {sum(w for w, _, _ in taken[name]):>8.2f} {means[name]:>13.3f} {ab:>9} {own}"
            )
        print(
            f"      (wall s per round: {', '.join(f'{n} ' + ' '.join(f'{w:.2f}' for w, _, _ in r) for n, r in taken.items())})"
        )
    print(
        f"load average before {tuple(round(x, 2) for x in load_before)}, after "
        f"{tuple(round(x, 2) for x in os.getloadavg())}, {os.cpu_count()} cores"
    )
    print(
        f"the plugin's own time, worst level: {worst_own:.3f} % of the step (target <= {TARGET_PCT} %): {'met' if worst_own <= TARGET_PCT else 'NOT met'}"
    )
    if "vllm" in arms:
        print(
            f"A/B, worst level: {worst_ab:+.2f} % (target <= {TARGET_PCT} %): {'met' if worst_ab <= TARGET_PCT else 'NOT met'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
