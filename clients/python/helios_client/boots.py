"""`upload_boot`: store the catalog an engine measured at start as a boot of its recipe.

An engine token may upload boots for the recipes it names (`POST /api/recipes/<name>/boots/`);
the boot's id then goes in every telemetry batch (`TelemetryReporter(boot=...)`), so the product
plans `cost`, replays and compares on what this engine measured.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from .http import Connection


def upload_boot(
    base_url: str,
    recipe: str,
    token: str,
    catalog: Sequence[Mapping[str, Any]],
    provenance: Mapping[str, Any] | None = None,
    *,
    timeout_s: float = 30.0,
) -> dict[str, Any]:
    """POST one boot; the stored boot as the server answers it (`id`, `catalog`, `provenance`, ...).
    Raises `ApiError` when the server refuses it (400 naming the entry) and `OSError` when it
    cannot be reached: the caller decides whether to retry (an engine serves on meanwhile)."""
    body: dict[str, Any] = {"catalog": [dict(graph) for graph in catalog]}
    if provenance is not None:
        body["provenance"] = dict(provenance)
    http = Connection(base_url, token)
    try:
        answer = http.request(
            f"/api/recipes/{urllib.parse.quote(recipe, safe='')}/boots/",
            timeout_s=timeout_s,
            data=json.dumps(body, allow_nan=False).encode(),
            headers={"Content-Type": "application/json"},
        )
    finally:
        http.close()
    stored: dict[str, Any] = json.loads(answer.body)
    return stored
