from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "heliosweb.audit"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import grants, guard, receivers  # noqa: F401  (connect the signal handlers)
