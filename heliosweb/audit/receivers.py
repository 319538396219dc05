"""Failed logins go to the audit trail, with the user name tried and the client's address."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.signals import user_login_failed
from django.dispatch import receiver

from heliosweb.common.clients import client_ip

from .services import audit_append


@receiver(user_login_failed)
def _login_failed(sender: Any, credentials: dict[str, Any], request: Any = None, **kwargs: Any) -> None:
    audit_append(
        action="login_failed",
        actor_name=str(credentials.get("username", "")),
        object_type="user",
        client_addr=client_ip(request),
    )
