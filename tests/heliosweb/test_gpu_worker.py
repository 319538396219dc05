"""A `gpu` worker that sees more than one CUDA device refuses to start (device counts simulated:
no machine here has two GPUs); a worker of other queues never asks."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpu_runner import workers
from heliosweb.celery import refuse_a_gpu_worker_seeing_several_devices


class Queues(dict):
    def __init__(self, consume_from: list[str] | None) -> None:
        super().__init__({"sim": object(), "gpu": object()})
        self.consume_from = {name: self[name] for name in consume_from} if consume_from else None


def worker(consume_from: list[str] | None) -> SimpleNamespace:
    return SimpleNamespace(app=SimpleNamespace(amqp=SimpleNamespace(queues=Queues(consume_from))))


@pytest.fixture
def devices(monkeypatch) -> list[int]:
    count = [0]
    monkeypatch.setattr(workers, "visible_device_count", lambda: count[0])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return count


def test_a_gpu_worker_seeing_two_devices_refuses_and_says_how_to_start_one_per_device(devices):
    devices[0] = 2
    with pytest.raises(SystemExit) as exited:
        refuse_a_gpu_worker_seeing_several_devices(sender=worker(["gpu"]))
    message = str(exited.value)
    assert message.startswith("gpu worker refused to start: this gpu worker sees 2 CUDA devices")
    assert "CUDA_VISIBLE_DEVICES is not set" in message
    assert "CUDA_VISIBLE_DEVICES=0 ./dev worker --queues gpu" in message
    assert "CUDA_VISIBLE_DEVICES=1 ./dev worker --queues gpu" in message


def test_a_worker_of_every_queue_is_a_gpu_worker_too(devices):
    devices[0] = 4
    with pytest.raises(SystemExit, match="sees 4 CUDA devices"):
        refuse_a_gpu_worker_seeing_several_devices(sender=worker(None))


@pytest.mark.parametrize(("count", "queues"), [(1, ["gpu"]), (0, ["gpu"]), (2, ["sim"])])
def test_one_device_none_or_no_gpu_queue_starts(devices, count, queues):
    devices[0] = count
    refuse_a_gpu_worker_seeing_several_devices(sender=worker(queues))


def test_a_choice_of_several_devices_is_refused_naming_them():
    message = workers.refusal(2, "2,3")
    assert message is not None and "(CUDA_VISIBLE_DEVICES=2,3)" in message
    assert "CUDA_VISIBLE_DEVICES=3 ./dev worker --queues gpu" in message
    assert workers.refusal(1, "2") is None
