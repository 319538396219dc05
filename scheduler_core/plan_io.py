"""The `plan` command's JSON contract (spec: "python -m scheduler_core plan"), free of any I/O."""

from __future__ import annotations

import json
from typing import Any

from .catalog import Catalog
from .errors import InvalidInput, Stalled
from .execution import parse_execution
from .planner import Plan, plan
from .policies import make_policy
from .request import Request
from .validation import reject_unknown_keys, require_mapping


def answer(data: Any) -> dict[str, Any]:
    """One input object -> one output object. Raises InvalidInput; a stall is an answer, not an error."""
    data = require_mapping(data, "input")
    reject_unknown_keys(data, {"policy", "catalog", "request", "execution"}, "")
    for key in ("policy", "catalog", "request"):
        if key not in data:
            raise InvalidInput(key, "is required")
    policy = make_policy(data["policy"])
    catalog = Catalog.from_dicts(data["catalog"])
    request = Request.parse(data["request"], catalog)
    execution = parse_execution(data["execution"]) if data.get("execution") is not None else None
    try:
        result: Plan = plan(policy, catalog, request, execution)
    except Stalled as stall:
        return {"error": "stalled", "position": stall.position, "policy": stall.policy, "message": str(stall)}
    return result.to_dict()


def parse_json(text: str, field: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(field, f"is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


def split_inputs(text: str) -> tuple[bool, list[str]]:
    """(single, chunks): one JSON document (possibly pretty-printed), or JSON Lines."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) <= 1:
        return True, lines
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False, lines
    return True, [text]


def answer_line(line: str, index: int) -> dict[str, Any]:
    """A JSON Lines answer: errors become that line's answer so the batch goes on."""
    try:
        return answer(parse_json(line, f"line {index + 1}"))
    except InvalidInput as exc:
        return exc.as_dict()
