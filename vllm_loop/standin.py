"""The product's three engine routes for one `vllm-check` run, in this process: the policy the
plugin follows (set by the run, read through the long-poll), and the boot and the telemetry it
posts, kept in memory. The run then needs no stack, no recipe and no engine token, and knows
exactly which policy each request was served under.
"""

from __future__ import annotations

import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

RECIPE = "vllm-check"


class Standin:
    """`url` for `HELIOS_URL`; `set_policy` changes it (a new version), `read_version` is the
    newest version the plugin was answered; `boots` and `records` are what it posted."""

    def __init__(self, policy: str) -> None:
        self.policy, self.version, self.read_version = policy, 1, 0
        self.boots: list[dict[str, Any]] = []
        self.records: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        self._server = _Server(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True, name="vllm-check-standin").start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def set_policy(self, policy: str) -> None:
        with self._changed:
            self.policy, self.version = policy, self.version + 1
            self._changed.notify_all()

    def answer(self, known: str | None, wait_s: float) -> dict[str, Any] | None:
        """The policy, or None (304) when `known` is its tag and it did not change within `wait_s`."""
        with self._changed:
            self._changed.wait_for(lambda: known != f'"v{self.version}"', timeout=wait_s)
            if known == f'"v{self.version}"':
                return None
            self.read_version = self.version
            return {
                "recipe": RECIPE,
                "policy": self.policy,
                "version": self.version,
                "decided_at": None,
                "decision": None,
            }

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A long-poll the plugin abandons as vLLM stops is no error worth a traceback."""


def _handler(standin: Standin) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: dict[str, Any] | None) -> None:
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # the policy, long-polled (?wait=N)
            wait = float(self.path.partition("wait=")[2] or 0)
            body = standin.answer(self.headers.get("If-None-Match"), min(wait, 30.0))
            self._send(304 if body is None else 200, body)

        def do_POST(self) -> None:  # a boot, or a batch of telemetry
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(gzip.decompress(raw) if self.headers.get("Content-Encoding") == "gzip" else raw)
            if self.path.rstrip("/").endswith("/boots"):
                standin.boots.append(body)
                self._send(201, {"id": len(standin.boots), **body})
                return
            standin.records.extend(body["records"])
            self._send(201, {"stored": True})

    return Handler
