"""The engine API: the policy read with ETag, If-None-Match and long-poll; engine tokens scoped to
their recipes' policy and telemetry."""

from __future__ import annotations

import asyncio
import threading
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import AsyncClient, Client

from heliosweb.recipes.services import policy_set, recipe_create

from .telemetry_records import body


def engine_token(engine: str = "eng-1", recipes: str = "tiny-cpu") -> str:
    out = StringIO()
    call_command("create_api_token", engine=engine, recipes=recipes, stdout=out)
    return out.getvalue().strip()


def bearer(token: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def test_the_policy_carries_an_etag_and_answers_304_to_the_current_one(recipe, maintainer):
    client = Client()
    client.force_login(maintainer)
    first = client.get("/api/recipes/tiny-cpu/policy")
    assert first.status_code == 200 and first["ETag"] == '"v1"' and first["Cache-Control"] == "no-cache"
    assert first.json() == {
        "recipe": "tiny-cpu",
        "policy": "cost",
        "version": 1,
        "decided_at": first.json()["decided_at"],
        "decision": None,
        "capacities": [],
    }
    same = client.get("/api/recipes/tiny-cpu/policy", HTTP_IF_NONE_MATCH='"v1"')
    assert same.status_code == 304 and same.content == b"" and same["ETag"] == '"v1"'
    policy_set(recipe=recipe, policy="rule")
    changed = client.get("/api/recipes/tiny-cpu/policy", HTTP_IF_NONE_MATCH='"v1"')
    assert changed.status_code == 200 and changed["ETag"] == '"v2"' and changed.json()["policy"] == "rule"


def test_a_long_poll_at_its_deadline_answers_304_and_bad_waits_400(recipe, maintainer):
    client = Client()
    client.force_login(maintainer)
    assert client.get("/api/recipes/tiny-cpu/policy?wait=0.2", HTTP_IF_NONE_MATCH='"v1"').status_code == 304
    for wait in ("31", "-1", "soon"):
        response = client.get(f"/api/recipes/tiny-cpu/policy?wait={wait}")
        assert response.status_code == 400 and response.json()["field"] == "wait"
    assert client.get("/api/recipes/nope/policy?wait=1", HTTP_IF_NONE_MATCH='"v1"').status_code == 404
    assert Client().get("/api/recipes/tiny-cpu/policy").status_code == 401


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_waiting_engine_is_answered_within_a_second_of_an_apply():
    from asgiref.sync import sync_to_async

    recipe = await sync_to_async(recipe_create)(name="tiny-cpu", policy="cost")
    token = await sync_to_async(engine_token)()
    client = AsyncClient()
    poll = asyncio.ensure_future(
        client.get(
            "/api/recipes/tiny-cpu/policy?wait=25",
            headers={"Authorization": f"Bearer {token}", "If-None-Match": '"v1"'},
        )
    )
    await asyncio.sleep(0.5)  # the engine is waiting
    assert not poll.done()
    applied = threading.Event()

    def apply() -> None:
        policy_set(recipe=recipe, policy="rule")
        applied.set()

    await sync_to_async(apply, thread_sensitive=False)()
    response = await asyncio.wait_for(poll, timeout=1.0)  # the deadline the issue sets, not a measurement
    assert response.status_code == 200 and response["ETag"] == '"v2"' and response.json()["policy"] == "rule"


def test_an_engine_token_reads_and_posts_only_for_its_recipes(recipe, maintainer):
    recipe_create(name="other", policy="cost")
    token = engine_token()
    client = Client(**bearer(token))
    assert client.get("/api/recipes/tiny-cpu/policy").status_code == 200
    for path in ("/api/recipes/other/policy", "/api/jobs/", "/api/recipes/", "/", "/api/schema/", "/admin/"):
        response = client.get(path)
        assert response.status_code == 403, path
        assert response.json()["field"] == "authorization"
    refused = client.post("/api/jobs/", {"kind": "pr22"}, content_type="application/json")
    assert refused.status_code == 403
    posted = client.post("/api/recipes/other/telemetry/", body([]), content_type="application/json")
    assert posted.status_code == 403


def test_an_engine_token_uploads_a_boot_of_its_recipe_and_nothing_else_on_that_route(recipe):
    from heliosweb.audit.models import AuditEvent
    from heliosweb.catalogs.models import Boot

    recipe_create(name="other", policy="cost")
    client = Client(**bearer(engine_token()))
    boot = {"catalog": [{"prefill": 64, "decode": 0, "ms": 3.5}], "provenance": {"device": "cpu"}}
    stored = client.post("/api/recipes/tiny-cpu/boots/", boot, content_type="application/json")
    assert stored.status_code == 201, stored.content
    assert Boot.objects.get(pk=stored.json()["id"]).recipe.name == "tiny-cpu"
    assert AuditEvent.objects.get(action="boot_uploaded").actor_name == "engine:eng-1"
    bad = client.post("/api/recipes/tiny-cpu/boots/", {"catalog": [{"prefill": 64}]}, content_type="application/json")
    assert bad.status_code == 400 and bad.json()["field"] == "catalog[0].decode"
    for refused in (
        client.post("/api/recipes/other/boots/", boot, content_type="application/json"),
        client.get("/api/recipes/tiny-cpu/boots/"),  # it uploads boots, it does not read them
    ):
        assert refused.status_code == 403 and refused.json()["field"] == "authorization"
    assert Boot.objects.count() == 1


def test_an_engine_token_is_stored_hashed_and_can_be_revoked(recipe):
    from heliosweb.telemetry.models import EngineToken

    token = engine_token()
    row = EngineToken.objects.get()
    assert token not in row.key_hash and len(row.key_hash) == 64
    out = StringIO()
    call_command("create_api_token", engine="eng-1", revoke=True, stdout=out)
    assert "revoked 1" in out.getvalue()
    response = Client(**bearer(token)).get("/api/recipes/tiny-cpu/policy")
    assert response.status_code == 401 and response.json()["field"] == "authorization"


def test_a_token_revoked_elsewhere_is_refused_once_the_checked_one_is_older_than_the_bound(recipe, monkeypatch):
    from heliosweb.telemetry import selectors
    from heliosweb.telemetry.tokens import engine_tokens_revoke

    client = Client(**bearer(engine_token()))
    clock = [1000.0]
    monkeypatch.setattr(selectors, "_clock", lambda: clock[0])
    assert client.get("/api/recipes/tiny-cpu/policy").status_code == 200
    engine_tokens_revoke(engine="eng-1")  # as another process would: this one still holds the token it read
    clock[0] += settings.HELIOS_ENGINE_TOKEN_CACHE_SECONDS - 0.5
    assert client.get("/api/recipes/tiny-cpu/policy").status_code == 200
    clock[0] += 1
    refused = client.get("/api/recipes/tiny-cpu/policy")
    assert refused.status_code == 401 and refused.json()["field"] == "authorization"


def test_creating_an_engine_token_names_a_bad_recipe_or_engine(recipe):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="unknown recipe 'nope'"):
        engine_token(recipes="tiny-cpu,nope")
    with pytest.raises(CommandError, match="--engine"):
        engine_token(engine="no spaces please")


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_engines_one_change_wakes_share_one_read_of_the_policy(monkeypatch):
    """Each waiter used to read the policy for itself: N queries queued on Django's one sync
    thread, so the last of 500 engines heard of a change seconds late (bench/engine_bench.py,
    part `waiters`, measures the whole path)."""
    from asgiref.sync import sync_to_async

    from heliosweb.recipes import policy_poll

    await sync_to_async(recipe_create)(name="tiny-cpu", policy="cost")
    reads: list[str] = []
    real = policy_poll.recipe_policy_get

    def counted(*, name: str) -> dict:
        reads.append(name)
        return real(name=name)

    monkeypatch.setattr(policy_poll, "recipe_policy_get", counted)
    woken = await asyncio.gather(*(policy_poll._read_after("tiny-cpu", 2) for _ in range(50)))
    assert len(reads) == 1 and all(policy == woken[0] for policy in woken)
    await asyncio.gather(*(policy_poll._read_after("tiny-cpu", None) for _ in range(3)))  # resyncs read alone
    assert len(reads) == 4


def test_the_policy_names_the_recipes_capacities_its_shapes_else_its_newest_boots(recipe, maintainer):
    from heliosweb.catalogs.services import boot_create
    from heliosweb.recipes.services import recipe_update

    client = Client()
    client.force_login(maintainer)

    def read() -> list[int]:
        return client.get("/api/recipes/tiny-cpu/policy").json()["capacities"]

    assert read() == []  # neither: an engine measures its own
    boot_create(recipe=recipe, catalog=[{"prefill": 256, "decode": 0, "ms": 2.0}, {"prefill": 64, "decode": 0, "ms": 1.0},
                                        {"prefill": 64, "decode": 8, "ms": 1.5}], provenance={"device": "cpu"})  # fmt: skip
    assert read() == [64, 256]  # the boot's solo prefill graphs (decode 0)
    recipe_update(actor=None, recipe=recipe, shapes=[{"prefill": 1536, "decode": 0}, {"prefill": 96, "decode": 0}])
    assert read() == [96, 1536]  # the declared shapes win
