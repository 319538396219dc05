"""Users' API tokens in the admin, through the same services as `manage.py create_api_token`:
created (the token shown once, on the next page; only its hash is kept), revoked by deleting,
each audited with the admin user as the actor. A token is never edited (nor moved to another user)."""

from typing import Any

from django.contrib import admin, messages
from rest_framework.authtoken.admin import TokenAdmin
from rest_framework.authtoken.models import Token, TokenProxy

from .tokens import user_token_issue, user_token_revoke

admin.site.unregister(TokenProxy)


@admin.register(TokenProxy)
class UserTokenAdmin(TokenAdmin):
    list_display = ("user", "created")  # the key column holds a hash: nothing to show

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def save_model(self, request: Any, obj: Any, form: Any, change: bool) -> None:
        token = user_token_issue(user=obj.user, actor=request.user)
        stored = Token.objects.get(user=obj.user)
        obj.key, obj.created = stored.key, stored.created
        obj._state.adding = False
        messages.warning(
            request,
            f"API token for {obj.user.get_username()}: {token} — copy it now: it is shown this once "
            "(only its hash is kept); use it as `Authorization: Bearer <token>`.",
        )

    def delete_model(self, request: Any, obj: Any) -> None:
        user_token_revoke(user=obj.user, actor=request.user)

    def delete_queryset(self, request: Any, queryset: Any) -> None:
        for token in queryset.select_related("user"):
            user_token_revoke(user=token.user, actor=request.user)
