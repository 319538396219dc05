"""The recipes JSON API: every recipe's active policy (one recipe's, for engines, is `policy_poll`)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from . import selectors

POLICY_FIELDS: dict[str, serializers.Field] = {
    "recipe": serializers.CharField(),
    "policy": serializers.CharField(),
    "version": serializers.IntegerField(),
}


class RecipeListView(APIView):
    @extend_schema(responses={200: inline_serializer("RecipePolicy", POLICY_FIELDS, many=True)})
    def get(self, request: Request) -> Response:
        return Response(selectors.recipe_policies())
