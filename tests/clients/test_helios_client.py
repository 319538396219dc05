"""The client package on its own, against a small stdlib HTTP server that answers as told: the
reporter's batching, retries under the same number and session, memory bound, gzip and refusals;
the watcher's If-None-Match, callbacks and backoff. (Against the real server: test_engine_client_e2e.)"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from helios_client import Backoff, LaunchRecord, PolicyWatcher, TelemetryReporter, record_problem
from helios_client.records import SCHEMA

FAST = Backoff(first_s=0.01, maximum_s=0.05)


class Fake:
    """Answers the queued statuses first (then 201, or the policy), and records every request."""

    def __init__(self) -> None:
        self.statuses: list[int] = []
        self.posts: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.gets: list[dict[str, str]] = []
        self.version = 1
        self.connections = 0
        self.drop_idle = False  # close each connection after its answer, without saying so
        self.stored: dict[str, Any] = {"stored": True}  # a 201's answer
        self.hold = threading.Event()
        self.hold.set()


@pytest.fixture
def fake() -> Iterator[tuple[Fake, str]]:
    state = Fake()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keeps connections alive (every answer has its length)

        def setup(self) -> None:
            state.connections += 1
            super().setup()

        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: dict[str, Any] | None = None) -> None:
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            if state.drop_idle:
                self.close_connection = True

        def do_POST(self) -> None:
            state.hold.wait()
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers.get("Content-Encoding") == "gzip":
                raw = gzip.decompress(raw)
            state.posts.append((dict(self.headers), json.loads(raw)))
            status = state.statuses.pop(0) if state.statuses else 201
            self._answer(status, {"error": "as told", "field": "batch"} if status >= 400 else state.stored)

        def do_GET(self) -> None:
            state.gets.append(dict(self.headers))
            if state.statuses:
                return self._answer(state.statuses.pop(0), {"error": "as told", "field": ""})
            if self.headers.get("If-None-Match") == f'"v{state.version}"':
                time.sleep(0.05)
                return self._answer(304)
            policy = "cost" if state.version % 2 else "rule"
            self._answer(
                200, {"recipe": "r", "policy": policy, "version": state.version, "decided_at": None, "decision": None}
            )

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield state, f"http://127.0.0.1:{server.server_address[1]}"
    state.hold.set()
    server.shutdown()


def launch(i: int, version: int = 1) -> LaunchRecord:
    return LaunchRecord(
        t_ms=1.8e12, request=f"cmpl-{i}", graph=512, start=0, end=300, padded=212, chooser="c", ms=1.0,
        policy="cost", version=version,
    )  # fmt: skip


def reporter(url: str, **kw: Any) -> TelemetryReporter:
    return TelemetryReporter(url, "r", "heng_x", "eng-1", backoff=FAST, flush_on_exit=False, **kw)


def test_batches_by_count_and_version_numbered_from_1_in_one_session(fake):
    state, url = fake
    rep = reporter(url, batch_records=3, interval_s=60)
    for i in range(5):
        rep.add(launch(i))
    rep.add(launch(5, version=2))  # a new version seals the open batch
    assert rep.flush(5)
    rep.close()
    bodies = [b for _, b in state.posts]
    assert [(b["batch"], len(b["records"])) for b in bodies] == [(1, 3), (2, 2), (3, 1)]
    assert {b["session"] for b in bodies} == {rep.session} and {b["schema"] for b in bodies} == {SCHEMA}
    assert [r["request"] for b in bodies for r in b["records"]] == [f"cmpl-{i}" for i in range(6)]
    assert rep.stats.posted_records == 6 and rep.stats.queued_records == 0


def test_a_batch_is_sealed_by_time(fake):
    state, url = fake
    rep = reporter(url, batch_records=1000, interval_s=0.1)
    rep.add(launch(0))
    deadline = time.monotonic() + 5
    while not state.posts and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [len(b["records"]) for _, b in state.posts] == [1]
    rep.close()


def test_a_failed_post_is_retried_under_the_same_number_and_session(fake):
    state, url = fake
    state.statuses = [503, 503, 429]
    rep = reporter(url, batch_records=2)
    rep.add(launch(0))
    rep.add(launch(1))
    assert rep.flush(5)
    rep.close()
    assert [(b["session"], b["batch"]) for _, b in state.posts] == [(rep.session, 1)] * 4
    assert len({json.dumps(b) for _, b in state.posts}) == 1  # the same content each time
    assert (rep.stats.retried_posts, rep.stats.posted_batches) == (3, 1)


def test_a_server_that_reads_this_schema_for_a_window_only_is_heard_once(fake, caplog):
    state, url = fake
    state.stored = {"stored": True, "upgrade": {"schema": SCHEMA + 1, "read_until": "2099-01-01", "why": "upgrade"}}
    rep = reporter(url, batch_records=1)
    rep.add(launch(0))
    rep.add(launch(1))
    assert rep.flush(5)
    rep.close()
    assert rep.stats.posted_batches == 2 and rep.stats.upgrade == "upgrade"  # stored all the same
    assert [r.message for r in caplog.records if "upgrade" in r.message] == [
        "telemetry: upgrade helios_client: upgrade"
    ]


def test_a_refused_batch_is_not_retried_and_the_next_one_goes_on(fake):
    state, url = fake
    state.statuses = [409]
    rep = reporter(url, batch_records=1)
    rep.add(launch(0))
    rep.add(launch(1))
    assert rep.flush(5)
    rep.close()
    assert [b["batch"] for _, b in state.posts] == [1, 2]
    assert (rep.stats.refused_batches, rep.stats.posted_batches) == (1, 1)


def test_memory_is_bounded_with_a_drop_counter_and_close_gives_up_in_time(fake):
    state, url = fake
    state.hold.clear()  # the server takes the first post and does not answer
    rep = reporter(url, batch_records=2, max_queued_records=5, timeout_s=0.2)
    state.statuses = [503] * 1000
    results = [rep.add(launch(i)) for i in range(8)]
    assert results == [True] * 5 + [False] * 3 and rep.stats.dropped_records == 3
    started = time.monotonic()
    rep.close(timeout_s=0.3)
    assert time.monotonic() - started < 10
    assert rep.stats.dropped_records == 8 and rep.stats.queued_records == 0


def test_gzip_bodies_say_so(fake):
    state, url = fake
    rep = reporter(url, batch_records=1, gzip=True)
    rep.add(launch(0))
    assert rep.flush(5)
    rep.close()
    headers, body = state.posts[0]
    assert headers["Content-Encoding"] == "gzip" and body["records"][0]["request"] == "cmpl-0"


def test_a_bad_record_is_named_before_it_is_queued(fake):
    _, url = fake
    rep = reporter(url)
    bad = {**launch(0).to_dict(), "graph": 2**40}
    assert record_problem(bad) is not None and record_problem(bad)[0] == "graph"
    with pytest.raises(ValueError, match="graph"):
        rep.add(bad)
    rep.close()


def test_the_watcher_follows_changes_with_if_none_match_and_backs_off(fake):
    state, url = fake
    watcher = PolicyWatcher(url, "r", "heng_x", wait_s=0.2, backoff=FAST)
    seen: list[int] = []
    watcher.on_change(lambda p: seen.append(p.version))
    assert watcher.start().version == 1 and watcher.current is not None
    state.statuses = [503, 503]  # the server away for two polls
    time.sleep(0.3)
    state.version = 2
    deadline = time.monotonic() + 5
    while not seen and time.monotonic() < deadline:
        time.sleep(0.02)
    watcher.stop()
    assert seen == [2] and watcher.current.policy == "rule"
    assert any(h.get("If-None-Match") == '"v1"' for h in state.gets)
    assert all(h["Authorization"] == "Bearer heng_x" for h in state.gets)


def test_what_is_queued_is_posted_at_interpreter_exit(fake):
    state, url = fake
    script = (
        "from helios_client import TelemetryReporter, LaunchRecord\n"
        f"r = TelemetryReporter({url!r}, 'r', 'heng_x', 'eng-1', batch_records=1000, interval_s=60)\n"
        "for i in range(3):\n"
        "    r.add(LaunchRecord(t_ms=1.8e12, request=i, graph=512, start=0, end=300, padded=212,"
        " chooser='c', ms=1.0, policy='cost', version=1))\n"
    )  # exits without close(): the reporter's atexit hook posts the open batch
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert [len(b["records"]) for _, b in state.posts] == [3]


def test_one_connection_is_kept_alive_and_one_the_server_dropped_is_replaced(fake):
    state, url = fake
    rep = reporter(url, batch_records=1)
    for i in range(5):
        rep.add(launch(i))
    assert rep.flush(5)
    assert (len(state.posts), state.connections) == (5, 1)
    state.drop_idle = True  # from now on the server closes each connection after answering
    for i in range(5, 8):
        rep.add(launch(i))
        assert rep.flush(5)
    rep.close()
    assert [b["batch"] for _, b in state.posts] == list(range(1, 9))  # each once: a stale socket is retried
    assert rep.stats.retried_posts == 0 and state.connections >= 3


def test_the_watcher_follows_a_change_within_2_s_of_the_servers_return_after_an_outage():
    """The default backoff (no `backoff=`): the server refuses connections for 10 s (long enough
    for a 30 s cap to have grown past 8 s), a decision is applied meanwhile, and the watcher sees it
    within 2 s of the server listening again."""
    version = {"v": 1}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.close_connection = True  # nothing outlives the server's shutdown: the outage is real
            v = version["v"]
            if self.headers.get("If-None-Match") == f'"v{v}"':
                time.sleep(0.05)
                self.send_response(304)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            data = json.dumps({"recipe": "r", "policy": "rule", "version": v, "decided_at": None, "decision": None})
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data.encode())

    def serve(port: int = 0) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    server = serve()
    port = server.server_address[1]
    watcher = PolicyWatcher(f"http://127.0.0.1:{port}", "r", "heng_x", wait_s=0.5, timeout_s=1.0)
    seen: list[float] = []
    watcher.on_change(lambda p: seen.append(time.monotonic()))
    watcher.start()
    server.shutdown()
    server.server_close()  # refused from now on: the watcher backs off
    time.sleep(10)
    assert watcher.failures >= 3
    version["v"] = 2
    server = serve(port)
    back = time.monotonic()
    try:
        while not seen and time.monotonic() < back + 10:
            time.sleep(0.02)
    finally:
        watcher.stop()
        server.shutdown()
        server.server_close()
    assert seen and seen[0] - back <= 2.0, f"followed {seen[0] - back if seen else None} s after the return"


def test_batches_not_posted_by_close_are_spooled_and_a_later_reporter_posts_them_under_their_own_numbers(
    fake, tmp_path
):
    state, url = fake
    state.hold.clear()  # the product is down: every post waits
    first = reporter(url, spool=tmp_path, batch_records=2, timeout_s=0.2)
    for i in range(5):
        first.add(launch(i))
    first.close(timeout_s=0.3)
    assert first.stats.spooled_batches == 3 and first.stats.dropped_records == 0
    assert sorted(p.name for p in tmp_path.glob("*.json")) == [f"{first.session}-{n:012d}.json" for n in (1, 2, 3)]
    state.hold.set()
    state.posts.clear()
    second = reporter(url, spool=tmp_path)
    assert second.stats.resumed_batches == 3
    second.add(launch(9))
    assert second.flush(5.0)
    # (the first reporter's abandoned post of batch 1 may reach the server too: the server stores it once)
    posted = list(
        dict.fromkeys((b["session"], b["batch"], tuple(r["request"] for r in b["records"])) for _, b in state.posts)
    )
    assert [(s, n, list(r)) for s, n, r in posted] == [
        (first.session, 1, ["cmpl-0", "cmpl-1"]),
        (first.session, 2, ["cmpl-2", "cmpl-3"]),
        (first.session, 3, ["cmpl-4"]),
        (second.session, 1, ["cmpl-9"]),
    ]
    assert all(b["engine"] == "eng-1" and b["schema"] == SCHEMA for _, b in state.posts)
    second.close()
    assert list(tmp_path.iterdir()) == []  # answered batches leave the spool


def test_a_spool_file_that_is_not_a_batch_is_set_aside_not_posted(fake, tmp_path):
    state, url = fake
    (tmp_path / "junk.json").write_text("{not json")
    with reporter(url, spool=tmp_path) as rep:
        assert rep.stats.resumed_batches == 0
    assert state.posts == [] and (tmp_path / "junk.bad").exists()


def test_while_the_server_fails_later_batches_are_sealed_by_time_and_spooled_before_any_close(fake, tmp_path):
    state, url = fake
    state.statuses = [503] * 10_000  # the product answers 503 until told otherwise
    rep = reporter(url, spool=tmp_path, batch_records=2, interval_s=0.05)
    for i in range(5):  # batches 1 and 2 by count; the fifth record's batch by time, during the retries
        rep.add(launch(i))
    deadline = time.monotonic() + 5
    while len(list(tmp_path.glob("*.json"))) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sorted(p.name for p in tmp_path.glob("*.json")) == [f"{rep.session}-{n:012d}.json" for n in (1, 2, 3)]
    state.statuses.clear()
    assert rep.flush(5.0)
    rep.close()
    assert list(tmp_path.glob("*.json")) == []
