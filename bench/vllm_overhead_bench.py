"""What the helios-vllm plugin costs a real vLLM: the same trace at 1, 8 and 32 concurrent requests,
served by engines started side by side in one run, vLLM's own `Scheduler` and `HeliosScheduler`
(`--engines` of each, started alternately), each wave of requests on every engine one right after
the other (the order alternating), so all see the host as it is in those seconds: on a shared
2-core host a round of a level swings up to 3x from one round to the next, a wave pair far less.
Two engine instances of one build also differ, by a percent or two for a whole run (an inert
`HeliosScheduler` ran 1 % faster than vLLM's own in one run), so each arm's wave time is the mean
over its engines, and each engine's own median over the plain engines' is printed beside.
Prints, per level, each arm's wall time, the A/B overhead (the median of the paired waves' wall
time ratios of the arms' means, with a 90 % bootstrap interval of that median), and the plugin's
own time: on the step path (the time `HeliosScheduler` spends in its own code each step, read from
the engine between levels) and in its threads (the reporter, the policy long-poll: their CPU time
from /proc), as a share of the plugin engines' wall time; both against the target (<= 2 %).

Run in vLLM's virtualenv (clients/vllm/README.md). The plugin follows `vllm_loop.standin` (the
product's engine routes, policy `rule`, in a process of its own) unless HELIOS_URL, HELIOS_RECIPE and
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
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from helios_vllm.models import CPU_ENGINE_ARGS, write

ROOT = Path(__file__).resolve().parent.parent  # vllm_loop.standin: standard library only

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


def serve(arms: dict, requests: list[tuple[int, int]], concurrency: int, seed: int) -> dict[str, list[float]]:
    """Serve `requests` in waves of `concurrency` on every arm, each wave on one arm right after the
    other (the order alternating from wave to wave): each arm's wall seconds per wave, paired."""
    from vllm import SamplingParams

    rng = random.Random(seed)  # the same token ids for both arms; distinct per request (no cache hits)
    prompts = [[rng.randrange(1, 32000) for _ in range(p)] for p, _ in requests]
    walls: dict[str, list[float]] = {name: [] for name in arms}
    for w, i in enumerate(range(0, len(requests), concurrency)):
        wave = range(i, min(i + concurrency, len(requests)))
        for name in list(arms) if w % 2 == 0 else list(reversed(arms)):
            start = time.perf_counter()
            arms[name].generate(
                [{"prompt_token_ids": prompts[j]} for j in wave],
                [SamplingParams(max_tokens=requests[j][1], ignore_eos=True, detokenize=False) for j in wave],
                use_tqdm=False,
            )
            walls[name].append(time.perf_counter() - start)
    return walls


def arm_waves(walls: dict[str, list[float]], arm: str) -> list[float]:
    """Each wave's mean wall time over the arm's engines (`vllm 1`, `vllm 2`, ...)."""
    engines = [taken for name, taken in walls.items() if name.split()[0] == arm]
    return [statistics.mean(wave) for wave in zip(*engines)]


def ratios(arm: list[float], base: list[float]) -> list[float]:
    """`arm`'s wave times over `base`'s, wave by wave, less 1."""
    return [a / b - 1 for a, b in zip(arm, base)]


def paired(arm: list[float], base: list[float], draws: int = 2000) -> tuple[float, str]:
    """The median of `arm`'s paired wave ratios over `base`'s, in %, and its text with a 90 %
    bootstrap interval: how far the pairs' own noise reaches. What differs between two engine
    instances for a whole run is not in it; the engines' line shows that."""
    each = ratios(arm, base)
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(each, k=len(each))) for _ in range(draws))
    low, high = medians[draws // 20], medians[draws - 1 - draws // 20]
    median = statistics.median(each) * 100
    return median, f"{median:>+9.2f} % ({low * 100:+.2f}..{high * 100:+.2f} %)"


def plugin_threads_cpu_s() -> float:
    """CPU seconds the plugin's own threads (the reporter, the policy long-poll, its connection and
    boot upload: named `helios-...`) have used so far, read from /proc: their work off the step
    path, which takes the core from the engine all the same."""
    total = 0
    for thread in threading.enumerate():
        if thread.name.startswith("helios-") and thread.native_id is not None:
            try:
                fields = Path(f"/proc/self/task/{thread.native_id}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # the thread ended between the two reads
                continue
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def standin_process() -> subprocess.Popen[str]:
    """`vllm_loop.standin` (policy `rule`) in a process of its own, its URL in HELIOS_URL: in a
    deployment the product runs elsewhere, and its work (parsing each batch of records the plugin
    posts) is not the engine's, so it must not share this process, and its GIL, with the engines."""
    code = "import time; from vllm_loop.standin import Standin; print(Standin('rule').url, flush=True); time.sleep(1e6)"
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    os.environ.update(HELIOS_URL=url, HELIOS_RECIPE="vllm-check", HELIOS_TOKEN="standin", HELIOS_ENGINE="bench")
    return proc


def policy_in_force() -> str:
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
    parser.add_argument(
        "--engines",
        type=int,
        default=2,
        help="engines per arm, started alternately: two engine instances of one build differ by a percent "
        "or two for a whole run, so the A/B is read over several, and their spread is printed",
    )
    args = parser.parse_args()
    standin = None if os.environ.get("HELIOS_URL") else standin_process()
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engines in this process: the plugin readable
    from vllm import LLM

    model = str(write(Path(tempfile.mkdtemp(prefix="helios-tiny-llama-")), "tiny"))
    common = dict(CPU_ENGINE_ARGS, gpu_memory_utilization=0.1)
    arms: dict = {}
    for n in range(1, args.engines + 1):
        if not args.helios_only:
            arms[f"vllm {n}"] = LLM(model=model, **common)
        arms[f"helios {n}"] = LLM(model=model, scheduler_cls="helios_vllm.scheduler.HeliosScheduler", **common)
    counted = [plugin(llm) for name, llm in arms.items() if name.startswith("helios")]
    requests = trace(args.trace, args.requests, args.longest, args.max_output)
    serve(arms, requests[:4], 4, seed=0)  # compiles, and the plugin's calibration, before any timing
    load_before = os.getloadavg()
    print(
        f"policy in force: {policy_in_force()}; {len(requests)} requests per level, prompts "
        f"{min(p for p, _ in requests)}-{max(p for p, _ in requests)} tokens (mean "
        f"{statistics.mean(p for p, _ in requests):.0f}), outputs <= {args.max_output}; {args.rounds} rounds"
    )
    print(
        f"{'level':>5} {'pairs':>6} {'steps':>6} {'wall s vllm':>12} {'helios':>8} {'A/B median':>11} "
        f"{'(90 % interval)':>18} {'own us/step':>12} {'threads us':>11} {'own share':>10}"
    )
    worst_ab, worst_own = -float("inf"), 0.0
    plain = any(name.startswith("vllm") for name in arms)
    for level in (int(x) for x in args.levels.split(",")):
        walls: dict[str, list[float]] = {name: [] for name in arms}
        before = (sum(c.steps for c in counted), sum(c.spent_s for c in counted), plugin_threads_cpu_s())
        for r in range(args.rounds):
            # new token ids each round (a repeated prompt would be served from the prefix cache)
            for name, taken in serve(arms, requests, level, seed=level * 1000 + r).items():
                walls[name] += taken
        steps = sum(c.steps for c in counted) - before[0]
        own_s = sum(c.spent_s for c in counted) - before[1]
        threads_s = plugin_threads_cpu_s() - before[2]
        helios = arm_waves(walls, "helios")
        own_share = (own_s + threads_s) / (sum(helios) * args.engines) * 100
        worst_own = max(worst_own, own_share)
        line = f"{level:>5} {len(helios):>6} {steps // args.engines:>6} "
        if plain:
            vllm = arm_waves(walls, "vllm")
            ab, text = paired(helios, vllm)
            worst_ab = max(worst_ab, ab)
            line += f"{sum(vllm):>12.2f} {sum(helios):>8.2f} {text}"
        else:
            line += f"{'':>12} {sum(helios):>8.2f} {'':>11} {'':>18}"
        print(f"{line} {own_s / steps * 1e6:>12.1f} {threads_s / steps * 1e6:>11.1f} {own_share:>8.3f} %")
        if plain and args.engines > 1:
            spread = [f"{name} {statistics.median(ratios(taken, vllm)) * 100:+.2f} %" for name, taken in walls.items()]
            print(f"{'':>5} each engine over the plain engines' mean: {', '.join(spread)}")
    print(
        f"load average before {tuple(round(x, 2) for x in load_before)}, after "
        f"{tuple(round(x, 2) for x in os.getloadavg())}, {os.cpu_count()} cores"
    )
    print(
        f"the plugin's own time (step path and its threads), worst level: {worst_own:.3f} % of the wall time "
        f"(target <= {TARGET_PCT} %): {'met' if worst_own <= TARGET_PCT else 'NOT met'}"
    )
    if plain:
        print(
            f"A/B (median of the paired waves' ratios), worst level: {worst_ab:+.2f} % (target <= {TARGET_PCT} %): "
            f"{'met' if worst_ab <= TARGET_PCT else 'NOT met'}"
        )
    if standin is not None:
        standin.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
