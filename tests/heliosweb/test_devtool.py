"""The worker commands and the supervisord config `./dev up` writes."""

from pathlib import Path


def test_gpu_workers_run_solo_and_are_named_after_their_devices(monkeypatch):
    from heliosweb.stack import celery_worker_cmd

    def worker(queues: str) -> tuple[str, str]:
        cmd = celery_worker_cmd(queues, concurrency=3)
        return cmd[cmd.index("-n") + 1], next(a for a in cmd if a.startswith("--pool="))

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert worker("gpu") == ("gpu@%h", "--pool=solo")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert worker("gpu") == ("gpu-cuda1@%h", "--pool=solo")
    assert worker("sim") == ("sim@%h", "--pool=prefork")
    assert "--concurrency=3" in celery_worker_cmd("sim", concurrency=3)


def test_the_config_restarts_every_child_and_drains_the_job_workers_together(tmp_path: Path, monkeypatch):
    """supervisord reads what we write: every program restarts; the job workers form one group
    (stopped together, so their drains run side by side) and get the drain limit before a kill."""
    from supervisor.options import ServerOptions

    from heliosweb import stack

    monkeypatch.setenv("HELIOS_DRAIN_SECONDS", "45")
    monkeypatch.setenv("HELIOS_SIM_CONCURRENCY", "3")
    paths = stack.Paths(tmp_path / "var")
    progs = stack.programs(var=paths.var, host="127.0.0.1", port=8123, redis_cmd=["redis-server", "--port", "1"])
    stack.write_config(paths, progs, tmp_path)
    options = ServerOptions()
    options.realize(args=["-c", str(paths.conf)])
    groups = {g.name: g for g in options.process_group_configs}
    assert [g.name for g in sorted(groups.values())] == ["redis", "worker-maint", "beat", "jobs", "web"]
    beat = groups["beat"].process_configs[0].command
    assert " beat " in beat and "--pidfile" in beat and " -B" not in groups["worker-maint"].process_configs[0].command
    assert {p.name for p in groups["jobs"].process_configs} == set(stack.JOB_WORKERS)
    assert set(stack.JOB_WORKERS) == {"worker-sim", "worker-sim-long", "worker-gpu", "worker-engine"}
    every = [p for g in groups.values() for p in g.process_configs]
    assert all(p.autorestart and p.killasgroup and not p.stopasgroup for p in every)
    sim = next(p for p in groups["jobs"].process_configs if p.name == "worker-sim")
    assert sim.stopwaitsecs == 45 + 30 and "--concurrency=3" in sim.command and "sim@%h" in sim.command
    web = next(p for p in every if p.name == "web").command
    assert f"-e tcp:port=8123:interface=127.0.0.1:backlog={stack.LISTEN_BACKLOG}" in web
    assert f"--websocket_connect_timeout {stack.WS_CONNECT_TIMEOUT_S}" in web


def test_a_worker_started_by_hand_never_takes_the_stacks_worker_name(monkeypatch):
    """`./dev worker` names its worker by queues, host and its own pid; it has no `--beat`."""
    import subprocess
    import sys

    from heliosweb.stack import celery_worker_cmd, worker_name

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    stacks = celery_worker_cmd("sim")[celery_worker_cmd("sim").index("-n") + 1]
    by_hand = {worker_name("sim", instance=str(pid)) for pid in (4242, 4243)}
    assert by_hand == {"sim.4242@%h", "sim.4243@%h"} and stacks not in by_hand
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert worker_name("gpu", instance="7") == "gpu-cuda1.7@%h"
    refused = subprocess.run(
        [sys.executable, "-m", "heliosweb.devtool", "worker", "--beat"], capture_output=True, text=True
    )
    assert refused.returncode == 2 and "unrecognized arguments: --beat" in refused.stderr
