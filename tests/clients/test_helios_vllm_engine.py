"""The plugin inside a real vLLM (its cached virtualenv, as a subprocess), against a small stand-in
for the product's three engine routes: the boot it measured arrives with its provenance, and across
a policy change the launches it reports for a solo prefill are `scheduler_core`'s plan for each
policy on that boot, launch by launch. (Against the real stack, with a decision applied through
the product: the `vllm` end-to-end test in tests/heliosweb.)"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from scheduler_core.catalog import Catalog
from scheduler_core.planner import plan
from scheduler_core.request import Request

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "clients" / "vllm" / "requirements-vllm.txt"
CACHE = Path(os.environ.get("HELIOS_CACHE") or Path.home() / ".cache" / "helios") / "vllm"
VENV = CACHE / hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:12]
PYTHON = VENV / "bin" / "python"

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.e2e,  # starts a real vLLM (minutes): -m "not e2e" leaves it out too
    pytest.mark.skipif(not PYTHON.exists(), reason=f"no vLLM virtualenv at {VENV} (./dev engine vllm makes it)"),
]


class Product:
    """The policy (changed by the test), and what the engine posted."""

    def __init__(self) -> None:
        self.policy, self.version = "rule", 1
        self.boots: list[dict[str, Any]] = []
        self.records: list[dict[str, Any]] = []


@pytest.fixture
def product() -> Iterator[tuple[Product, str]]:
    state = Product()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # the policy (no long-poll: answered at once, 304 when unchanged)
            if self.headers.get("If-None-Match") == f'"v{state.version}"':
                threading.Event().wait(0.5)
                self.send_response(304)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self._answer(
                200,
                {"recipe": "r", "policy": state.policy, "version": state.version, "decided_at": None, "decision": None},
            )

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            body = json.loads(gzip.decompress(raw) if self.headers.get("Content-Encoding") == "gzip" else raw)
            if self.path.endswith("/boots/"):
                state.boots.append(body)
                return self._answer(201, {"id": len(state.boots), **body})
            state.records.extend(body["records"])
            self._answer(201, {"stored": True})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield state, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_plugin_in_vllm_uploads_its_boot_and_chunks_each_solo_prefill_as_planned(product, tmp_path):
    state, url = product
    env = dict(os.environ, HELIOS_URL=url, HELIOS_RECIPE="r", HELIOS_TOKEN="heng_test", HELIOS_ENGINE="vllm-test",
               HELIOS_SPOOL=str(tmp_path / "spool"), VLLM_CPU_KVCACHE_SPACE="1")  # fmt: skip
    script = ROOT / "clients" / "vllm" / "examples" / "policy_switch.py"
    proc = subprocess.Popen(
        [str(PYTHON), str(script), "--phases", "2", "--prompt", "3000", "--wait-s", "120"],
        cwd=script.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    phases = []
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith('{"phase"'):
            phases.append(json.loads(line))
            state.policy, state.version = "cost", 2  # the decision, applied after the first phase
    assert proc.wait(timeout=60) == 0, "policy_switch.py failed"
    assert [(p["policy"], p["version"]) for p in phases] == [("rule", 1), ("cost", 2)]

    assert len(state.boots) == 1
    boot = state.boots[0]
    assert {"vllm_version", "device", "dtype", "model", "padding", "repeats", "host_load"} <= set(boot["provenance"])
    catalog = Catalog.from_dicts(boot["catalog"])
    for phase in phases:
        finished = [r for r in state.records if r["type"] == "request" and r["prompt_tokens"] == 3000
                    and phase["since_ms"] <= r["t_ms"] <= phase["until_ms"] + 1000]  # fmt: skip
        assert len(finished) == 1 and (finished[0]["policy"], finished[0]["version"]) == (
            phase["policy"],
            phase["version"],
        )
        ran = [
            (r["start"], r["end"])
            for r in state.records
            if r["type"] == "launch" and r["request"] == finished[0]["request"]
        ]
        planned = plan(phase["policy"], catalog, Request(3000))
        assert ran == [(l.start, l.end) for l in planned.launches], phase["policy"]
    assert not list((tmp_path / "spool").glob("*.json"))  # everything posted, nothing left behind
