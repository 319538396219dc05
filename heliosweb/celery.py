"""The Celery app. Queues: `sim` (scheduler_core analyses), `sim_long` (the large ones, so they never
hold every `sim` slot), `gpu` (gpu_runner, `--pool=solo`, one worker per GPU: one seeing several
devices refuses to run), `engine` (simulated engines, a thread each) and `maint` (the reaper,
pruning: never behind a job)."""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from celery.signals import worker_init
from kombu import Exchange, Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "heliosweb.settings")

QUEUES = ("sim", "sim_long", "gpu", "engine", "maint")

app = Celery("heliosweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Jobs are sent by queue name (Celery's anonymous exchange), so routing never depended on this;
# naming each queue's own exchange and key keeps the worker's banner from listing gpu under sim's.
app.conf.task_queues = tuple(Queue(name, Exchange(name), routing_key=name) for name in QUEUES)
app.autodiscover_tasks()


@worker_init.connect
def refuse_a_gpu_worker_seeing_several_devices(sender: Any, **_: Any) -> None:
    """A `gpu` worker seeing several CUDA devices exits before taking a job, saying how (gpu_runner.workers)."""
    queues = sender.app.amqp.queues
    if "gpu" not in set(queues.consume_from or queues):
        return
    from gpu_runner.workers import refusal, visible_device_count

    message = refusal(visible_device_count(), os.environ.get("CUDA_VISIBLE_DEVICES"))
    if message:
        raise SystemExit(f"gpu worker refused to start: {message}")
