"""The audit trail's periodic full check (beat, on the `maint` queue): a thin wrapper over the service."""

from __future__ import annotations

from celery import shared_task

from .services import chain_check_store


@shared_task(name="heliosweb.audit.tasks.check_audit_chain", ignore_result=True)
def check_audit_chain() -> None:
    chain_check_store()
