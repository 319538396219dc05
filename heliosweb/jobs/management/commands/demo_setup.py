import os
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.management.base import BaseCommand

from heliosweb.recipes.services import recipe_ensure

DEMO_RECIPES = [
    ("llama-8b-h100", "8B decoder, one H100, CUDA graphs captured per shape", "cost"),
    ("mistral-7b-a100", "7B decoder, one A100", "rule"),
    ("tiny-cpu", "the seeded tiny model gpu_runner builds (CPU or any GPU)", "cost"),
]


class Command(BaseCommand):
    help = "Create the maintainers group, a demo maintainer account and demo recipes (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--username", default=os.environ.get("HELIOS_DEMO_USER", "maintainer"))

    def handle(self, *args, username: str, **options):
        group, _ = Group.objects.get_or_create(name="maintainers")
        group.permissions.add(Permission.objects.get(codename="run_jobs", content_type__app_label="jobs"))
        user_model = get_user_model()
        user = user_model.objects.filter(username=username).first()
        password = os.environ.get("HELIOS_DEMO_PASSWORD", "")
        if user is None:
            password = password or secrets.token_urlsafe(12)
            user = user_model.objects.create_user(username=username, password=password, is_staff=True)
            self.stdout.write(f"demo maintainer: {username} / password: {password}")
        elif password:
            user.set_password(password)
            user.save(update_fields=["password"])
            self.stdout.write(f"demo maintainer: {username} / password: (from HELIOS_DEMO_PASSWORD)")
        else:
            self.stdout.write(f"demo maintainer: {username} (password unchanged; set HELIOS_DEMO_PASSWORD to reset it)")
        user.groups.add(group)
        # Staff can read the (read-only) admin history.
        for model in ("benchmarkjob", "jobevent", "boot", "recipe", "policysetting"):
            user.user_permissions.add(*Permission.objects.filter(codename=f"view_{model}"))
        for name, description, policy in DEMO_RECIPES:
            recipe_ensure(name=name, description=description, policy=policy)
        from heliosweb.decisions.demo import demo_decisions_setup  # the second maintainer who approves

        demo_decisions_setup(maintainer=user, stdout=self.stdout)
