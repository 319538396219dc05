"""Django's `flush`, allowed to empty the audit table (the test runner calls it by this name)."""

from typing import Any

from django.core.management.commands import flush

from heliosweb.audit.guard import flush_permitted


class Command(flush.Command):
    def handle(self, **options: Any) -> None:
        with flush_permitted():
            super().handle(**options)
