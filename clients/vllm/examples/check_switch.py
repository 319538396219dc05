"""Check what policy_switch.py served against the product's own records (run in the product's
virtualenv, beside its database): for each phase, the launches stored for its solo request must be
`scheduler_core`'s plan for the phase's policy on the boot the plugin measured, launch by launch.

    DATABASE_URL=... python clients/vllm/examples/check_switch.py RECIPE ENGINE < phases.json
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "heliosweb.settings")
import django

django.setup()

from heliosweb.catalogs.models import Boot  # noqa: E402
from heliosweb.telemetry.models import TelemetryBatch  # noqa: E402
from scheduler_core.catalog import Catalog  # noqa: E402
from scheduler_core.planner import plan  # noqa: E402
from scheduler_core.request import Request  # noqa: E402


def main(recipe: str, engine: str) -> int:
    phases = [json.loads(line) for line in sys.stdin if line.startswith('{"phase"')]  # (vLLM logs to stdout too)
    batches = list(TelemetryBatch.objects.filter(recipe__name=recipe, engine=engine).order_by("seq"))
    records = [r for b in batches for r in b.records]
    boots = {b.boot_id for b in batches} - {None}
    boot = Boot.objects.get(pk=max(boots)) if boots else Boot.objects.filter(recipe__name=recipe).latest("pk")
    catalog = Catalog.from_dicts(boot.catalog)
    print(f"boot {boot.pk}: {[(g.prefill, round(g.ms or 0, 3)) for g in catalog.graphs]}")
    print(f"provenance: device={boot.provenance.get('device')!r} padding={boot.provenance.get('padding')!r}")
    print(f"stored: {len(batches)} batches, {len(records)} records, sessions {sorted({b.session for b in batches})}")
    failed = 0
    for phase in phases:
        finished = [
            r
            for r in records
            if r["type"] == "request"
            and phase["since_ms"] <= r["t_ms"] <= phase["until_ms"] + 1000
            and r["prompt_tokens"] == phase["prompt_tokens"]
        ]
        if len(finished) != 1:
            print(f"phase {phase['phase']}: {len(finished)} request records in its window, expected 1")
            failed += 1
            continue
        request = finished[0]
        launches = [r for r in records if r["type"] == "launch" and r["request"] == request["request"]]
        ran = [(l["start"], l["end"], l["chooser"]) for l in launches]
        planned = plan(phase["policy"], catalog, Request(phase["prompt_tokens"]))
        expected = [(l.start, l.end, l.chooser) for l in planned.launches]
        same = ran == expected and (request["policy"], request["version"]) == (phase["policy"], phase["version"])
        failed += not same
        print(
            f"phase {phase['phase']} {phase['policy']} v{phase['version']}: request {request['request']} "
            f"(ttft {request['ttft_ms']:.1f} ms, record says {request['policy']} v{request['version']})"
        )
        print(f"  ran     {[(s, e, c) for s, e, c in ran]}  step ms {[round(l['ms'], 2) for l in launches]}")
        print(f"  planned {expected}  -> {'SAME' if same else 'DIFFERENT'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
