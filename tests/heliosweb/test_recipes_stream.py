"""The recipes websocket: a snapshot of every active policy on connect, then each decision step live."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from heliosweb.decisions import services as decisions

from .conftest import ORIGIN
from .test_consumers import _connect, _receive, _session_cookie

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


async def test_it_sends_a_snapshot_then_each_decision_step_as_it_commits(recipe, author, reviewer, applier):
    cookie = await database_sync_to_async(_session_cookie)(author)
    communicator, connected, _ = await _connect("/ws/recipes/", [cookie, ORIGIN])
    assert connected
    assert await _receive(communicator) == {
        "type": "snapshot",
        "recipes": [{"recipe": "tiny-cpu", "policy": "cost", "version": 1, "emergency": None}],
    }

    def decide():
        decision = decisions.decision_propose(
            actor=author, recipe="tiny-cpu", policy="rule", rationale="PR #22 evidence"
        )
        decision = decisions.decision_approve(actor=reviewer, decision=decision)
        decisions.decision_apply(actor=applier, decision=decision)

    await database_sync_to_async(decide)()

    messages = [await _receive(communicator) for _ in range(4)]
    # the change itself (from the one setter, whatever called it), then the decision step that made it
    change = messages.pop(2)
    assert change == {
        "type": "policy",
        "recipe": "tiny-cpu",
        "policy": "rule",
        "version": 2,
        "from_policy": "cost",
        "from_version": 1,
        "actor": applier.username,
        "reason": change["reason"],
        "emergency": False,
    }
    steps = messages
    assert [s["action"] for s in steps] == ["proposed", "approved", "applied"]
    assert all(s["type"] == "decision" and s["recipe"] == "tiny-cpu" for s in steps)
    assert (steps[-1]["policy"], steps[-1]["version"]) == ("rule", 2)
    await communicator.send_to(text_data="hello")
    assert (await _receive(communicator))["type"] == "error"
    await communicator.disconnect()
