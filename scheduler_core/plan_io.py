"""The `plan` command's JSON contract (spec: "python -m scheduler_core plan"), free of any I/O."""

from __future__ import annotations

import json
from typing import Any

from .catalog import Catalog
from .errors import InvalidInput, Stalled
from .execution import ExecutionModel, parse_execution
from .planner import MAX_PLAN_WORK, Plan, plan, plan_work
from .policies import Policy, make_policy
from .reading import loads
from .request import Request
from .validation import reject_unknown_keys, require_list, require_mapping


def answer(data: Any) -> dict[str, Any]:
    """One input object -> one output object. Raises InvalidInput; a stall is an answer, not an error.

    With `"policies": [...]` instead of `"policy"`, the same request is planned by each policy
    and the answer is `{"plans": [one answer per policy, in order]}`."""
    data = require_mapping(data, "input")
    reject_unknown_keys(data, {"policy", "policies", "catalog", "request", "execution"}, "")
    if "policy" in data and "policies" in data:
        raise InvalidInput("policies", "give either policy or policies, not both")
    names = _policy_names(data)
    for key in ("catalog", "request"):
        if key not in data:
            raise InvalidInput(key, "is required")
    many = "policies" in data
    policies = [make_policy(name, f"policies[{i}]" if many else "policy") for i, name in enumerate(names)]
    catalog = Catalog.from_dicts(data["catalog"])
    request = Request.parse(data["request"], catalog)
    execution = parse_execution(data["execution"]) if data.get("execution") is not None else None
    work = plan_work(catalog, request) * len(policies)
    if work > MAX_PLAN_WORK:
        raise InvalidInput(
            "request.prompt_tokens",
            f"this plan is too large ({work:,} work units, limit {MAX_PLAN_WORK:,}): "
            f"{request.prompt_tokens:,} tokens in graphs of at most {catalog.full_chunk:,}; "
            "shorten the prompt or plan with a catalog of larger graphs",
        )
    plans = [_plan_or_stall(policy, catalog, request, execution) for policy in policies]
    return {"plans": plans} if many else plans[0]


def _policy_names(data: dict[str, Any]) -> list[Any]:
    if "policies" not in data:
        if "policy" not in data:
            raise InvalidInput("policy", "is required")
        return [data["policy"]]
    names = require_list(data["policies"], "policies")
    if not names:
        raise InvalidInput("policies", "must not be empty")
    if len(set(map(str, names))) != len(names):
        raise InvalidInput("policies", "has duplicate items")
    return names


def _plan_or_stall(
    policy: Policy, catalog: Catalog, request: Request, execution: ExecutionModel | None
) -> dict[str, Any]:
    try:
        result: Plan = plan(policy, catalog, request, execution)
    except Stalled as stall:
        return {"error": "stalled", "position": stall.position, "policy": stall.policy, "message": str(stall)}
    return result.to_dict()


def split_inputs(text: str) -> tuple[bool, list[str]]:
    """(single, chunks): one JSON document (possibly pretty-printed), or JSON Lines."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) <= 1:
        return True, lines
    try:
        json.loads(text)
    except (ValueError, RecursionError):  # each line is then read (and refused) on its own
        return False, lines
    return True, [text]


def answer_line(line: str, index: int) -> dict[str, Any]:
    """A JSON Lines answer: errors become that line's answer so the batch goes on."""
    try:
        return answer(loads(line, f"line {index + 1}"))
    except InvalidInput as exc:
        return exc.as_dict()
