from django.core.management.base import BaseCommand, CommandError

from heliosweb.decisions.selectors import audit_verify


class Command(BaseCommand):
    help = "Walk the decisions audit hash chain; exit non-zero at the first broken link."

    def handle(self, *args, **options):
        report = audit_verify()
        if not report.ok:
            raise CommandError(
                f"audit chain broken at #{report.broken_at}: {report.reason} ({report.count} events verified before it)"
            )
        self.stdout.write(f"audit chain verified: {report.count} events, head {report.head_hash}")
