"""HTTP as a real daphne hands it to Django: chunked bodies are read, slow clients are timed out
(headers, bodies, a length no body can have) while long-polls and websockets are not, and the
telemetry lane (`server.handler`) answers every request of one table exactly as Django's own
test client does (the sync handler, no lane), with the middleware's headers."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission
from django.test import Client

from heliosweb.devtool import free_port
from heliosweb.recipes.models import Recipe
from heliosweb.stack import web_cmd
from heliosweb.telemetry.models import TelemetryBatch

from . import test_request_pipeline as pipeline
from .conftest import ROOT, stop, use_redis, wait_until
from .telemetry_records import body as batch_body
from .telemetry_records import launch

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

engine, user_token = pipeline.engine, pipeline.user_token  # the fixtures: an engine's and a maintainer's token
HEADER_S, BODY_S, MIN_RATE = 2, 3, 1000  # the web server's read timeouts in these tests
TELEMETRY = "/api/recipes/tiny-cpu/telemetry/"


@dataclass
class Web:
    port: int
    log: Path

    def send(self, data: bytes, timeout: float = 20) -> tuple[int, dict[str, str], bytes]:
        """Send raw bytes on a new connection; the answer, read until the server closes or has sent
        Content-Length bytes."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
            s.sendall(data)
            return read_answer(s)


def read_answer(s: socket.socket) -> tuple[int, dict[str, str], bytes]:
    raw = b""
    while b"\r\n\r\n" not in raw:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before an answer: {raw!r}")
        raw += chunk
    head, body = raw.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    chunked = headers.get("transfer-encoding") == "chunked"
    while (b"\r\n0\r\n\r\n" not in b"\r\n" + body) if chunked else len(body) < int(headers.get("content-length", 0)):
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    if chunked:
        decoded = b""
        while True:
            size, _, rest = body.partition(b"\r\n")
            if int(size, 16) == 0:
                break
            decoded, body = decoded + rest[: int(size, 16)], rest[int(size, 16) + 2 :]
        body = decoded
    return int(lines[0].split()[1]), headers, body


@pytest.fixture
def web(_stack_session: Any, transactional_db: None, settings: Any, tmp_path: Path) -> Iterator[Web]:
    use_redis(_stack_session.redis_url, settings)
    port = free_port()
    env = dict(
        _stack_session.env,
        HELIOS_HTTP_HEADER_TIMEOUT=str(HEADER_S),
        HELIOS_HTTP_BODY_TIMEOUT=str(BODY_S),
        HELIOS_HTTP_BODY_MIN_RATE=str(MIN_RATE),
    )
    log = tmp_path / "web.log"
    proc = subprocess.Popen(
        web_cmd("127.0.0.1", port), cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT
    )

    def listening() -> bool:
        assert proc.poll() is None, log.read_text()[-3000:]
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    wait_until(listening, what="daphne to listen")
    try:
        yield Web(port, log)
    finally:
        stop(proc, 10)
        print(log.read_text()[-5000:])


def request(method: str, path: str, headers: list[tuple[str, str]], body: bytes = b"", chunked: bool = False) -> bytes:
    """One HTTP/1.1 request as bytes; `chunked` sends the body in 3 chunks with no Content-Length."""
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close", *(f"{k}: {v}" for k, v in headers)]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
        third = max(1, len(body) // 3)
        parts = [body[i : i + third] for i in range(0, len(body), third)]
        payload = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"
    else:
        lines.append(f"Content-Length: {len(body)}")
        payload = body
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


def batch(n: int) -> bytes:
    return json.dumps(batch_body([launch(n)], batch=n)).encode()


# --- chunked bodies -----------------------------------------------------------------------------


def test_chunked_bodies_are_read_on_the_telemetry_lane_and_on_every_other_api_post(web, engine, user_token, maintainer):
    maintainer.user_permissions.add(
        Permission.objects.get(content_type__app_label="recipes", codename="manage_recipes")
    )
    status, headers, body = web.send(
        request(
            "POST",
            TELEMETRY,
            [("Authorization", f"Bearer {engine}"), ("Content-Type", "application/json")],
            batch(1),
            chunked=True,
        )
    )
    assert (status, json.loads(body)["stored"]) == (201, True), body
    assert headers["x-content-type-options"] == "nosniff" and "content-security-policy" in headers  # the middleware ran
    recipe = json.dumps({"name": "chunked-recipe", "policy": "rule"}).encode()
    status, _, body = web.send(
        request(
            "POST",
            "/api/recipes/",
            [("Authorization", f"Bearer {user_token}"), ("Content-Type", "application/json")],
            recipe,
            chunked=True,
        )
    )
    assert status == 201, body
    assert TelemetryBatch.objects.count() == 1 and Recipe.objects.filter(name="chunked-recipe").exists()


# --- slow clients ---------------------------------------------------------------------------------


def test_headers_sent_a_line_a_second_are_timed_out(web):
    with socket.create_connection(("127.0.0.1", web.port), timeout=20) as s:
        start = time.monotonic()
        s.sendall(b"GET /api/kinds/ HTTP/1.1\r\n")
        with pytest.raises(ConnectionError):
            for i in range(30):
                s.sendall(f"X-Slow-{i}: 1\r\n".encode())
                time.sleep(1)
        # The server answered and closed; what it sent is still to be read.
    assert time.monotonic() - start < HEADER_S + 4


def test_a_request_line_sent_a_byte_a_second_is_answered_408_when_its_time_is_up(web):
    with socket.create_connection(("127.0.0.1", web.port), timeout=20) as s:
        start = time.monotonic()
        try:
            for byte in b"GET /api/kinds/ HT"[: HEADER_S + 2]:
                s.sendall(bytes([byte]))
                time.sleep(1)
        except ConnectionError:
            pass  # the server answered and closed while the line was still coming
        status, headers, body = read_answer(s)
        assert (status, json.loads(body)["field"]) == (408, "headers")
        assert headers["connection"] == "close" and s.recv(1) == b""
    assert time.monotonic() - start < HEADER_S + 5


def test_a_hundred_bodies_at_a_byte_a_second_are_timed_out_and_others_are_served_meanwhile(web, engine):
    head = request("POST", TELEMETRY, [("Authorization", f"Bearer {engine}"), ("Content-Type", "application/json")])
    head = head.replace(b"Content-Length: 0", b"Content-Length: 100")

    async def slow_client() -> tuple[int, str, float]:
        reader, writer = await asyncio.open_connection("127.0.0.1", web.port)
        start = time.monotonic()
        writer.write(head)
        answer = b""
        try:
            for _ in range(60):
                writer.write(b"{")
                await writer.drain()
                try:
                    answer = await asyncio.wait_for(reader.read(65536), 1.0)
                    break
                except TimeoutError:
                    continue
        finally:
            writer.close()
        status = int(answer.split()[1]) if answer else 0
        return status, json.loads(answer.split(b"\r\n\r\n", 1)[1] or b"{}").get("field", ""), time.monotonic() - start

    async def main() -> list[tuple[int, str, float]]:
        clients = asyncio.gather(*(slow_client() for _ in range(100)))
        await asyncio.sleep(1)
        served = await asyncio.to_thread(web.send, request("GET", "/api/kinds/", []))
        assert served[0] in (401, 403), served  # answered (no credentials) while 100 bodies trickle
        return await clients

    results = asyncio.run(main())
    assert {(status, field) for status, field, _ in results} == {(408, "body")}, results[:5]
    assert max(took for _, _, took in results) < BODY_S + 100 / MIN_RATE + 5


def test_a_content_length_no_body_can_have_is_413_before_any_of_it_is_read(web, engine):
    head = request("POST", TELEMETRY, [("Authorization", f"Bearer {engine}"), ("Content-Type", "application/json")])
    status, _, body = web.send(head.replace(b"Content-Length: 0", b"Content-Length: 18446744073709551616"), timeout=5)
    answer = json.loads(body)
    assert (status, answer["field"]) == (413, "body") and f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,}" in answer["error"]


def test_a_chunked_body_past_the_limit_is_cut_off_with_413(web, engine):
    with socket.create_connection(("127.0.0.1", web.port), timeout=20) as s:
        s.sendall(request("POST", TELEMETRY, [("Authorization", f"Bearer {engine}")], b"", chunked=True)[:-5])
        chunk = b"x" * 1_000_000
        try:
            for _ in range(settings.DATA_UPLOAD_MAX_MEMORY_SIZE // len(chunk) + 2):
                s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        except (BrokenPipeError, ConnectionResetError):
            pass
        status, _, body = read_answer(s)
    assert (status, json.loads(body)["field"]) == (413, "body")


def test_a_long_poll_outlives_the_read_timeouts(web, engine):
    wait = BODY_S + HEADER_S + 1
    start = time.monotonic()
    status, headers, _ = web.send(
        request(
            "GET",
            f"/api/recipes/tiny-cpu/policy?wait={wait}",
            [("Authorization", f"bearer {engine}"), ("If-None-Match", '"v1"')],
        ),
        timeout=wait + 10,
    )
    assert (status, headers["etag"]) == (304, '"v1"')
    assert time.monotonic() - start >= wait - 0.5


def test_a_websocket_outlives_the_read_timeouts(web, maintainer, settings, _stack_session):
    settings.SECRET_KEY = _stack_session.env["HELIOS_SECRET_KEY"]  # the session is signed as daphne checks it
    client = Client()
    client.force_login(maintainer)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    with socket.create_connection(("127.0.0.1", web.port), timeout=20) as s:
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall(
            (
                f"GET /ws/recipes/ HTTP/1.1\r\nHost: 127.0.0.1:{web.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: http://127.0.0.1:{web.port}\r\n"
                f"Cookie: {cookie}\r\n\r\n"
            ).encode()
        )
        assert b" 101 " in s.recv(4096).split(b"\r\n")[0]
        time.sleep(BODY_S + HEADER_S + 1)
        mask = os.urandom(4)
        s.sendall(bytes([0x89, 0x84]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(b"ping")))
        seen = b""
        deadline = time.monotonic() + 10
        while b"\x8a\x04ping" not in seen and time.monotonic() < deadline:  # the pong, among any messages
            chunk = s.recv(65536)
            assert chunk, "the server closed the websocket"
            seen += chunk
        assert b"\x8a\x04ping" in seen


# --- one answer whichever handler serves it ---------------------------------------------------------


def cases(engine: str, user: str) -> list[tuple[str, str, list[tuple[str, str]], Any, bool, int]]:
    """(name, path, headers as sent, body of batch number n, chunked, status). A header listed twice
    is sent twice to daphne; the test client gets it as Django joins them (`a,a`)."""
    json_type = ("Content-Type", "application/json")
    auth = ("Authorization", f"Bearer {engine}")
    user_auth = ("Authorization", f"Bearer {user}")
    return [
        ("stored", TELEMETRY, [auth, json_type], batch, False, 201),
        ("chunked", TELEMETRY, [auth, json_type], batch, True, 201),
        (
            "gzip",
            TELEMETRY,
            [auth, json_type, ("Content-Encoding", "gzip")],
            lambda n: gzip.compress(batch(n)),
            False,
            201,
        ),
        ("scheme in lower case", TELEMETRY, [("Authorization", f"bearer {engine}"), json_type], batch, False, 201),
        ("empty body", TELEMETRY, [auth, json_type], lambda n: b"", False, 400),
        ("duplicated Content-Type", TELEMETRY, [auth, json_type, json_type], batch, False, 415),
        ("duplicated Authorization", TELEMETRY, [auth, auth, json_type], batch, False, 401),
        ("no credentials", TELEMETRY, [json_type], batch, False, 401),
        ("unknown engine token", TELEMETRY, [("Authorization", "Bearer heng_nope"), json_type], batch, False, 401),
        (
            "multipart without boundary",
            "/api/jobs/",
            [user_auth, ("Content-Type", "multipart/form-data")],
            lambda n: b"--x\r\n",
            False,
            415,
        ),
        ("token post to an unknown path", "/api/nowhere/", [user_auth, json_type], lambda n: b"{}", False, 404),
        ("a Host not allowed", TELEMETRY, [auth, json_type, ("Host", "evil.example")], batch, False, 400),
    ]


def through_daphne(web: Web, path: str, headers: list[tuple[str, str]], body: bytes, chunked: bool) -> tuple[int, str]:
    host = dict(headers).get("Host")
    raw = request("POST", path, [(k, v) for k, v in headers if k != "Host"], body, chunked)
    if host:
        raw = raw.replace(b"Host: 127.0.0.1", f"Host: {host}".encode())
    status, answer_headers, answer = web.send(raw)
    assert answer_headers.get("content-type") == "application/json", (
        status,
        answer_headers,
        answer,
    )  # never an empty or HTML answer
    assert answer_headers["x-content-type-options"] == "nosniff"  # the middleware ran
    return status, json.loads(answer).get("field", "") if status >= 400 else ""


def through_test_client(path: str, headers: list[tuple[str, str]], body: bytes) -> tuple[int, str]:
    joined: dict[str, list[str]] = {}
    for k, v in headers:
        joined.setdefault(k, []).append(v)
    meta = {"HTTP_" + k.upper().replace("-", "_"): ",".join(v) for k, v in joined.items() if k != "Content-Type"}
    content_type = ",".join(joined.get("Content-Type", ["application/octet-stream"]))
    response = Client().post(path, body, content_type=content_type, **meta)
    return response.status_code, response.json().get("field", "") if response.status_code >= 400 else ""


def test_each_request_gets_the_same_answer_through_daphne_and_through_djangos_test_client(web, engine, user_token):
    for n, (name, path, headers, body, chunked, status) in enumerate(cases(engine, user_token), start=1):
        served = through_daphne(web, path, headers, body(n), chunked)
        assert served[0] == status, (name, served)
        assert through_test_client(path, headers, body(100 + n)) == served, name  # its own batch number


def test_a_trace_upload_may_pass_the_api_body_bound_and_no_other_post_may(web, user_token):
    """A stored trace may be 64 MiB (HELIOS_LARGE_BODIES); every other body keeps the 5 MB bound."""
    rows = [
        r + b"\n" for r in (ROOT / "tests" / "data" / "traces" / "azure-llm-2023-code.csv").read_bytes().splitlines()
    ]
    big = rows[0] + b"".join(rows[1:]) * 18
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE < len(big) < settings.TRACE_UPLOAD_MAX_BYTES
    auth = [("Authorization", f"Bearer {user_token}")]
    status, _, body = web.send(
        request("POST", "/api/traces/?name=azure-x18", [*auth, ("Content-Type", "text/csv")], big)
    )
    assert status == 201 and json.loads(body)["requests"] == 18 * (len(rows) - 1), body[:300]
    head = request("POST", "/api/jobs/", [*auth, ("Content-Type", "application/json")])  # refused at its headers
    status, _, body = web.send(head.replace(b"Content-Length: 0", b"Content-Length: %d" % len(big)), timeout=5)
    assert (status, json.loads(body)["field"]) == (413, "body")
