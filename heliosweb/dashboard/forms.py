"""The job form is generated from each kind's declared parameters. It only collects values and
converts obvious types; every check (ranges, sizes, choices) happens once, in `job_create`."""

from __future__ import annotations

import json
from typing import Any

from django.http import QueryDict

from heliosweb.common.bounds import BadJSON, parse_json
from heliosweb.jobs.registry import JobKind
from scheduler_core.errors import InvalidInput


def field_name(kind: str, param: str) -> str:
    return f"{kind}.{param}"


def params_from_post(kind: JobKind, post: QueryDict) -> dict[str, Any]:
    """Raw form values -> the params dict the service validates. Unparseable text is passed on
    unchanged so the service names the field in its error."""
    params: dict[str, Any] = {}
    for p in kind.analysis.params:
        name = field_name(kind.name, p.name)
        if p.kind == "choice_list":
            if name in post:
                params[p.name] = post.getlist(name)
            elif f"{name}.present" in post:
                params[p.name] = []
            continue
        if p.kind in ("catalog", "catalog_list"):
            ids = [_number(x, int) for x in post.getlist(f"{name}.boots") if x.strip()]
            if ids:  # stored boots picked from the list; the service swaps in their catalogs
                params[p.name] = {"boot": ids[0]} if p.kind == "catalog" else {"boots": ids}
                continue
        raw = post.get(name)
        if raw is None or raw.strip() == "":
            continue
        raw = raw.strip()
        if p.kind == "int":
            params[p.name] = _number(raw, int)
        elif p.kind == "float":
            params[p.name] = _number(raw, float)
        elif p.kind == "int_list":
            params[p.name] = [_number(x.strip(), int) for x in raw.replace(";", ",").split(",") if x.strip()]
        elif p.kind == "choice":
            params[p.name] = raw
        else:  # catalog, catalog_list and any structured kind: JSON text, read with bounds
            try:
                params[p.name] = parse_json(raw, root=p.name)
            except BadJSON as exc:
                if exc.message.startswith("not JSON"):
                    params[p.name] = raw  # the parameter's own check says what it expected
                else:
                    raise InvalidInput(f"params.{p.name}", exc.message) from None
    return params


def _number(raw: str, cast: type) -> Any:
    try:
        return cast(raw.replace("_", ""))
    except ValueError:
        return raw


def form_kinds(
    kinds: dict[str, JobKind],
    values: dict[str, Any] | None = None,
    boots: list[dict[str, Any]] | None = None,
    picked_boot: int | None = None,
) -> list[dict[str, Any]]:
    """What the template renders: each kind with its params, defaults and current values;
    catalog parameters also offer the stored `boots` ({id, label}) to pick from, `picked_boot`
    already selected (a recipe page's "analyse this boot" link)."""
    boots = [{**b, "selected": b["id"] == picked_boot} for b in boots or []]
    out = []
    for kind in kinds.values():
        params = []
        for p in kind.analysis.params:
            spec = p.to_dict()
            name = field_name(kind.name, p.name)
            value = (values or {}).get(name, p.default)
            if p.kind == "int_list":
                value = ", ".join(str(v) for v in value) if isinstance(value, (list, tuple)) else value or ""
            if p.kind == "choice_list" and not isinstance(value, (list, tuple)):
                value = [value]
            if p.kind not in ("int", "float", "choice", "int_list", "choice_list") and not isinstance(value, str):
                value = "" if value is None else json.dumps(value)
            params.append(
                {**spec, "field": name, "value": value, "boots": boots if p.kind in ("catalog", "catalog_list") else []}
            )
        out.append({"name": kind.name, "queue": kind.queue, "summary": kind.summary, "params": params})
    return out
