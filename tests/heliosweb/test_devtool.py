"""The worker command `./dev up` and `./dev worker` start."""


def test_gpu_workers_run_solo_and_are_named_after_their_devices(monkeypatch):
    from heliosweb.devtool import celery_worker_cmd

    def worker(queues: str) -> tuple[str, str]:
        cmd = celery_worker_cmd(queues)
        return cmd[cmd.index("-n") + 1], next(a for a in cmd if a.startswith("--pool="))

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert worker("gpu") == ("gpu@%h", "--pool=solo")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert worker("gpu") == ("gpu-cuda1@%h", "--pool=solo")
    assert worker("sim") == ("sim@%h", "--pool=prefork")
