"""What the plugin is told, by environment variables only (as `vllm serve` passes nothing else to a
scheduler class): `HELIOS_URL`, `HELIOS_RECIPE`, `HELIOS_TOKEN`, `HELIOS_ENGINE`, `HELIOS_SPOOL`."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

_NOT_SLUG = re.compile(r"[^A-Za-z0-9_-]+")
MAX_ENGINE = 64  # helios_client.records.MAX_ENGINE


@dataclass(frozen=True)
class Settings:
    url: str
    recipe: str
    token: str
    engine: str
    spool: Path | None

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Settings | None:
        """The plugin's settings, or None when `HELIOS_URL` is unset (vLLM schedules as it always
        does). With the URL set, a missing recipe or token is a ValueError naming the variable:
        an engine that was meant to follow a recipe must not quietly serve without it."""
        url = env.get("HELIOS_URL", "").strip()
        if not url:
            return None
        for name in ("HELIOS_RECIPE", "HELIOS_TOKEN"):
            if not env.get(name, "").strip():
                raise ValueError(f"{name} is required when HELIOS_URL is set")
        engine = env.get("HELIOS_ENGINE", "").strip() or default_engine_name(socket.gethostname())
        if _NOT_SLUG.search(engine) or len(engine) > MAX_ENGINE:
            raise ValueError(f"HELIOS_ENGINE must be 1-{MAX_ENGINE} letters, digits, '-' or '_', got {engine!r}")
        spool = env.get("HELIOS_SPOOL", "").strip()
        return cls(
            url, env["HELIOS_RECIPE"].strip(), env["HELIOS_TOKEN"].strip(), engine, Path(spool) if spool else None
        )


def default_engine_name(host: str) -> str:
    """`vllm-<host>`, spelled as the product takes engine names (letters, digits, '-', '_')."""
    return ("vllm-" + _NOT_SLUG.sub("-", host).strip("-"))[:MAX_ENGINE].rstrip("-") or "vllm"
