from typing import Any

from django.apps import AppConfig, apps
from django.db.models.signals import post_migrate


def _roles_after_migrate(sender: Any, **kwargs: Any) -> None:
    """`flush` (the test runner's reset) empties the groups; they come back with the permissions."""
    from django.contrib.auth.models import Group, Permission

    from .roles import roles_ensure

    roles_ensure(Group, Permission)


class DashboardConfig(AppConfig):
    name = "heliosweb.dashboard"
    label = "dashboard"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import roles  # noqa: F401  (declares the role groups' permissions to audit_verify)

        # post_migrate is sent per app with models (this one has none), in INSTALLED_APPS order, and
        # auth creates each app's permissions on it: after the last such app, every permission exists.
        last = [config for config in apps.get_app_configs() if config.models_module is not None][-1]
        post_migrate.connect(_roles_after_migrate, sender=last, dispatch_uid="helios-roles")
