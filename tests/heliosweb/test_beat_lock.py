"""One beat per deployment: the lease in Redis (`common.beat_lock`) that a second beat, on any
host, waits on. A real Redis of its own (the bundled one); the holders are real processes' ids."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import redis

from heliosweb.common.beat_lock import LEASE_S, BeatLease
from heliosweb.devtool import start_redis


@pytest.fixture
def client(tmp_path: Path):
    server, url = start_redis(tmp_path / "redis")
    try:
        yield redis.Redis.from_url(url)
    finally:
        server.terminate()
        server.wait(timeout=10)


def lease_of(client: redis.Redis, host: str, pid: int) -> BeatLease:
    lease = BeatLease(client, "test:helios:beat")
    lease.host, lease.pid, lease.mine = host, pid, f"{host} {pid}"
    return lease


def test_a_second_beat_waits_until_the_first_releases(client):
    first, second = lease_of(client, "main", os.getpid()), lease_of(client, "other-host", 1234)
    assert first.try_take() is None
    assert second.try_take() == f"main {os.getpid()}"  # a standby, told who holds it
    assert first.renew() and 0 < client.ttl("test:helios:beat") <= LEASE_S
    assert not second.renew()  # a standby renews nothing
    first.release()
    assert second.try_take() is None and not first.renew()


def test_a_dead_beat_of_this_host_is_taken_over_at_once(client):
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = lease_of(client, BeatLease(client, "x").host, gone.pid)
    assert dead.try_take() is None
    restarted = BeatLease(client, "test:helios:beat")  # this process, on the same host
    assert restarted.try_take() is None and restarted.renew()


def test_a_lease_redis_lost_is_taken_again_on_renewal(client):
    lease = lease_of(client, "main", os.getpid())
    assert lease.try_take() is None
    client.flushall()  # Redis restarted without its data
    assert lease.renew() and client.get("test:helios:beat") == lease.mine.encode()
