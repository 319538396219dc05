"""What the helios-vllm plugin costs a real vLLM: the same trace at 1, 8 and 32 concurrent requests,
served by two engines started side by side in one run, vLLM's own `Scheduler` and
`HeliosScheduler`, their runs interleaved (A B, then B A) so both see the same host load.
Prints each arm's wall time and mean step time and the plugin's overhead (the ratio of wall times
over the same work) against the target (<= 2 %).

Run in vLLM's virtualenv (clients/vllm/README.md), against a running product whose recipe runs
`rule`: on the CPU, with the recipe's full chunk equal to `max_num_batched_tokens`, `rule` chunks
a solo prefill exactly as vLLM does, so both engines run the same steps and the difference is the
plugin's own cost (planning, records, the reporter's queue). The step count is vLLM's own
(`vllm:iteration_tokens_total`), read for the plugin's engine: vLLM's Prometheus registry is one per
process and keeps the metrics of the engine started last, so the other engine's count is taken to be
the same (it runs the same steps by construction).

    HELIOS_URL=http://127.0.0.1:8101 HELIOS_RECIPE=vllm-tiny HELIOS_TOKEN=heng_... \\
    HELIOS_ENGINE=vllm-bench VLLM_CPU_KVCACHE_SPACE=1 \\
        ~/.cache/helios/vllm/<key>/bin/python bench/vllm_overhead_bench.py

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

TRACE = Path("/work/shared/data/traces/azure-llm-2023-code.csv")
TARGET_PCT = 2.0


def trace(path: Path, count: int, longest: int, max_output: int) -> list[tuple[int, int]]:
    """(prompt tokens, output tokens) of the trace's first `count` requests, scaled to `longest`."""
    with path.open() as f:
        rows = [(int(r["ContextTokens"]), int(r["GeneratedTokens"])) for _, r in zip(range(count), csv.DictReader(f))]
    scale = min(1.0, longest / max(p for p, _ in rows))
    return [(max(1, round(p * scale)), max(1, min(o, max_output))) for p, o in rows]


def steps(llm) -> int:
    """The engine's step count so far: vLLM's own `vllm:iteration_tokens_total` histogram count."""
    for metric in llm.get_metrics():
        if metric.name == "vllm:iteration_tokens_total":
            return int(metric.count)
    raise SystemExit("vLLM reported no vllm:iteration_tokens_total (is disable_log_stats off?)")


def serve(llm, requests: list[tuple[int, int]], concurrency: int, seed: int, counted) -> tuple[float, int]:
    """Serve `requests` in waves of `concurrency` on `llm`: (wall seconds, steps `counted` made)."""
    from vllm import SamplingParams

    rng = random.Random(seed)  # the same token ids for both arms; distinct per request (no cache hits)
    prompts = [[rng.randrange(1, 32000) for _ in range(p)] for p, _ in requests]
    before = steps(counted)
    start = time.perf_counter()
    for i in range(0, len(requests), concurrency):
        wave = range(i, min(i + concurrency, len(requests)))
        llm.generate(
            [{"prompt_token_ids": prompts[j]} for j in wave],
            [SamplingParams(max_tokens=requests[j][1], ignore_eos=True, detokenize=False) for j in wave],
            use_tqdm=False,
        )
    return time.perf_counter() - start, steps(counted) - before


def product_policy() -> str:
    url = f"{os.environ['HELIOS_URL']}/api/recipes/{os.environ['HELIOS_RECIPE']}/policy"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {os.environ['HELIOS_TOKEN']}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        body = json.load(answer)
    return f"{body['policy']} (version {body['version']})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--levels", default="1,8,32")
    parser.add_argument("--requests", type=int, default=64, help="requests per level (and per arm, per round)")
    parser.add_argument("--rounds", type=int, default=2, help="A-B rounds per level (the order alternates)")
    parser.add_argument("--longest", type=int, default=4000, help="the longest prompt after scaling")
    parser.add_argument("--max-output", type=int, default=16)
    parser.add_argument(
        "--helios-only",
        action="store_true",
        help="start only the plugin's engine (its shutdown logs the plugin's own time per step)",
    )
    args = parser.parse_args()
    if not os.environ.get("HELIOS_URL"):
        raise SystemExit(
            "set HELIOS_URL, HELIOS_RECIPE, HELIOS_TOKEN (and HELIOS_ENGINE): the plugin arm follows a recipe"
        )
    from vllm import LLM

    model = str(write(Path(tempfile.mkdtemp(prefix="helios-tiny-llama-")), "tiny"))
    common = dict(CPU_ENGINE_ARGS, disable_log_stats=False, gpu_memory_utilization=0.1)
    arms = {} if args.helios_only else {"vllm": LLM(model=model, **common)}
    # (the plugin's engine last: its metrics are the registry's)
    arms["helios"] = LLM(model=model, scheduler_cls="helios_vllm.scheduler.HeliosScheduler", **common)
    counted = arms["helios"]
    requests = trace(args.trace, args.requests, args.longest, args.max_output)
    for llm in arms.values():  # compiles, and the plugin's calibration, before any timing
        serve(llm, requests[:4], 4, seed=0, counted=counted)
    load_before = os.getloadavg()
    print(
        f"policy in force: {product_policy()}; {len(requests)} requests per level, prompts "
        f"{min(p for p, _ in requests)}-{max(p for p, _ in requests)} tokens (mean "
        f"{statistics.mean(p for p, _ in requests):.0f}), outputs <= {args.max_output}; {args.rounds} rounds"
    )
    print(f"{'level':>5} {'arm':>7} {'steps':>6} {'wall s':>8} {'mean step ms':>13} {'overhead':>9}")
    worst = 0.0
    for level in (int(x) for x in args.levels.split(",")):
        taken: dict[str, list[tuple[float, int]]] = {name: [] for name in arms}
        for r in range(args.rounds):
            order = list(arms) if r % 2 == 0 else list(reversed(arms))
            for name in order:
                # new token ids each round (a repeated prompt would be served from the prefix cache),
                # the same for both engines
                taken[name].append(serve(arms[name], requests, level, seed=level * 1000 + r, counted=counted))
        count = sum(n for _, n in taken["helios"])  # the plugin's engine's steps (see the docstring)
        means = {}
        for name, runs in taken.items():
            wall = sum(w for w, _ in runs)
            means[name] = wall / count * 1000
            overhead = (
                "" if name == "vllm" or "vllm" not in means else f"{(means[name] / means['vllm'] - 1) * 100:+.2f} %"
            )
            print(f"{level:>5} {name:>7} {count:>6} {wall:>8.2f} {means[name]:>13.3f} {overhead:>9}")
        print(
            f"      (wall s per round: {', '.join(f'{n} ' + ' '.join(f'{w:.2f}' for w, _ in r) for n, r in taken.items())})"
        )
        if "vllm" in means:
            worst = max(worst, (means["helios"] / means["vllm"] - 1) * 100)
    load_after = os.getloadavg()
    print(
        f"load average before {tuple(round(x, 2) for x in load_before)}, after "
        f"{tuple(round(x, 2) for x in load_after)}, {os.cpu_count()} cores"
    )
    if not args.helios_only:
        print(
            f"worst overhead {worst:+.2f} % (target <= {TARGET_PCT} %): {'met' if worst <= TARGET_PCT else 'NOT met'}"
        )
    del arms  # each engine core's shutdown: the plugin logs its own time per step
    return 0


if __name__ == "__main__":
    sys.exit(main())
