from django.core.management.base import BaseCommand

from heliosweb.jobs.services.reaper import jobs_reap


class Command(BaseCommand):
    help = "Mark failed the running jobs whose worker vanished (dead process here, or a stale heartbeat)."

    def add_arguments(self, parser):
        parser.add_argument("--stale-seconds", type=float, default=None)

    def handle(self, *args, stale_seconds, **options):
        reaped = jobs_reap(stale_seconds=stale_seconds)
        self.stdout.write(f"reaped {len(reaped)} job(s): {reaped}")
