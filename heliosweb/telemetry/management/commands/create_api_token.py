"""API tokens: a user's (`create_api_token USERNAME`), or an engine's, limited to some recipes'
policy reads and telemetry posts (`create_api_token --engine NAME --recipes a,b`). Both are
stored hashed: the token is printed once."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from heliosweb.recipes.models import Recipe
from heliosweb.telemetry.tokens import engine_token_create, engine_tokens_revoke, user_token_issue, user_token_revoke
from scheduler_core.errors import InvalidInput


class Command(BaseCommand):
    help = (
        "Print an API token (use it as `Authorization: Bearer <token>`): for USERNAME, or with --engine "
        "for an engine that may only read the policies and post the telemetry of --recipes."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", nargs="?")
        parser.add_argument(
            "--rotate", action="store_true", help="replace the user's existing token (needed when they have one)"
        )
        parser.add_argument("--engine", help="issue an engine token for this engine name instead of a user token")
        parser.add_argument("--recipes", default="", help="comma-separated recipes the engine token may use")
        parser.add_argument("--revoke", action="store_true", help="revoke every token of --engine (or of USERNAME)")

    def handle(
        self,
        *args: Any,
        username: str | None,
        rotate: bool,
        engine: str | None,
        recipes: str,
        revoke: bool,
        **options: Any,
    ) -> None:
        if engine:
            self._engine(engine, recipes, revoke)
            return
        if not username:
            raise CommandError("give a USERNAME, or --engine NAME --recipes a,b")
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        if revoke:
            user_token_revoke(user=user)
            self.stdout.write(f"revoked {username}'s token")
            return
        try:
            self.stdout.write(user_token_issue(user=user, rotate=rotate))
        except InvalidInput as exc:
            raise CommandError(f"{exc.message}: --rotate replaces it") from None

    def _engine(self, engine: str, recipes: str, revoke: bool) -> None:
        if revoke:
            self.stdout.write(f"revoked {engine_tokens_revoke(engine=engine)} token(s) of engine {engine!r}")
            return
        names = [n.strip() for n in recipes.split(",") if n.strip()]
        if not names:
            raise CommandError("--recipes: name at least one recipe the engine may use")
        found = list(Recipe.objects.filter(name__in=names))
        unknown = sorted(set(names) - {r.name for r in found})
        if unknown:
            raise CommandError(f"--recipes: unknown recipe {unknown[0]!r}")
        try:
            self.stdout.write(engine_token_create(engine=engine, recipes=found))
        except InvalidInput as exc:
            raise CommandError(f"--engine: {exc.message}") from None
