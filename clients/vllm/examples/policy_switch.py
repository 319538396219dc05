"""Serve solo prefills on a real vLLM with the Helios plugin, across a policy change made in the
product: one solo prompt per phase, the next phase once the product's policy version has moved on.

    HELIOS_URL=... HELIOS_RECIPE=... HELIOS_TOKEN=... HELIOS_ENGINE=... \\
        python policy_switch.py --phases 2 --prompt 3000 > phases.json

Prints one JSON line per phase: {phase, policy, version, prompt_tokens, since_ms, until_ms}. The
product then holds each request's launches (its telemetry) and the boot the plugin measured; what
they must equal is `scheduler_core`'s plan for the phase's policy on that boot (check_switch.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from helios_vllm.models import CPU_ENGINE_ARGS, write


def product_policy() -> tuple[str, int]:
    url = f"{os.environ['HELIOS_URL']}/api/recipes/{os.environ['HELIOS_RECIPE']}/policy"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {os.environ['HELIOS_TOKEN']}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        body = json.load(answer)
    return body["policy"], int(body["version"])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--phases", type=int, default=2)
    parser.add_argument("--prompt", type=int, default=3000)
    parser.add_argument("--wait-s", type=float, default=600, help="how long to wait for each policy change")
    args = parser.parse_args()
    from vllm import LLM, SamplingParams

    model = write(Path(tempfile.mkdtemp(prefix="helios-tiny-llama-")), "tiny")
    llm = LLM(model=str(model), scheduler_cls="helios_vllm.scheduler.HeliosScheduler", **CPU_ENGINE_ARGS)
    params = SamplingParams(max_tokens=8, ignore_eos=True, detokenize=False)
    rng = random.Random(7)

    def serve(tokens: int) -> None:
        llm.generate([{"prompt_token_ids": [rng.randrange(1, 32000) for _ in range(tokens)]}], params, use_tqdm=False)

    serve(100)  # the first request starts the plugin's calibration
    seen = 0
    for phase in range(args.phases):
        deadline = time.monotonic() + args.wait_s
        policy, version = product_policy()
        while version <= seen:
            if time.monotonic() > deadline:
                print(f"no policy change within {args.wait_s} s", file=sys.stderr)
                return 1
            time.sleep(1.0)
            policy, version = product_policy()
        seen = version
        print(f"phase {phase}: the product says {policy} (version {version})", file=sys.stderr, flush=True)
        time.sleep(3.0)  # the plugin's long-poll hears of a change within a second
        since = time.time() * 1000
        serve(args.prompt)
        print(
            json.dumps(
                {
                    "phase": phase,
                    "policy": policy,
                    "version": version,
                    "prompt_tokens": args.prompt,
                    "since_ms": since,
                    "until_ms": time.time() * 1000,
                }
            ),
            flush=True,
        )
    llm.llm_engine.engine_core.shutdown()  # the engine core stops: its reporter posts what is queued
    time.sleep(5.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
