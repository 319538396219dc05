from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from heliosweb.audit.anchors import anchor_append, anchor_check
from heliosweb.audit.services import chain_check_store
from heliosweb.decisions.selectors import audit_verify


class Command(BaseCommand):
    help = (
        "Check the audit trail: the keyed hash chain, every recipe's policy against its last policy "
        "event, and (with --anchor) that no event anchored earlier was cut; exit non-zero on the first problem."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--anchor",
            type=Path,
            help="a file outside the database: checked against, then the current head is appended to it",
        )

    def handle(self, *args: Any, anchor: Path | None = None, **options: Any) -> None:
        report = audit_verify(chain=chain_check_store(), evidence=True)  # the whole chain, stored for the pages
        if not report.ok:
            where = f" at #{report.broken_at}" if report.broken_at else ""
            raise CommandError(f"audit check failed{where}: {report.reason} ({report.count} events verified)")
        if anchor is not None:
            problem = anchor_check(anchor)
            if problem:
                raise CommandError(f"audit check failed against {anchor}: {problem}")
            self.stdout.write(f"anchored: {anchor_append(anchor, report)}")
        self.stdout.write(f"audit chain verified: {report.count} events, head {report.head_hash}")
