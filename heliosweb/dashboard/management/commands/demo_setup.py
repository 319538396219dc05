import os

from django.core.management.base import BaseCommand

from heliosweb.dashboard.demo import demo_setup


class Command(BaseCommand):
    help = "Create the demo groups, a demo maintainer and reviewer, and demo recipes (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--username", default=os.environ.get("HELIOS_DEMO_USER", "maintainer"))

    def handle(self, *args, username: str, **options):
        demo_setup(username=username, stdout=self.stdout)
