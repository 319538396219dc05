"""One HTTP exchange with the Helios API, and the backoff both background threads use."""

from __future__ import annotations

import json
import random
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

USER_AGENT = "helios-client/0.2"


class ApiError(Exception):
    """An answer the server gave on purpose (4xx): `status`, and its `{error, field}` body."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"HTTP {status}: {body.get('field', '')}: {body.get('error', body)}")
        self.status, self.body = status, body

    @property
    def retryable(self) -> bool:
        """429 (throttled) is worth retrying; any other 4xx says the request itself is wrong."""
        return self.status == 429


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter (each wait uniform in [0, min(maximum, first * 2^n)]),
    so engines that lost the server at the same moment do not all come back at the same moment."""

    first_s: float = 0.5
    maximum_s: float = 30.0

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        ceiling = min(self.maximum_s, self.first_s * 2 ** min(attempt, 30))
        return (rng or random).uniform(0, ceiling)


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


def exchange(
    url: str, *, token: str, timeout_s: float, data: bytes | None = None, headers: dict[str, str] | None = None
) -> Answer:
    """One request; 2xx and 304 come back as an `Answer`, 4xx raises `ApiError`, and 5xx or a
    network failure raise `OSError` (what a caller retries)."""
    request = urllib.request.Request(
        url,
        data=data,
        method="POST" if data is not None else "GET",
        headers={"Authorization": f"Bearer {token}", "User-Agent": USER_AGENT, **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return Answer(response.status, dict(response.headers.items()), response.read())
    except urllib.error.HTTPError as exc:
        body = exc.read()
        if exc.code == 304:
            return Answer(304, dict(exc.headers.items()), b"")
        if 400 <= exc.code < 500:
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = {"error": body[:500].decode("utf-8", "replace")}
            raise ApiError(exc.code, parsed if isinstance(parsed, dict) else {"error": parsed}) from None
        raise OSError(f"HTTP {exc.code} from {url}") from None


DEFAULT_BACKOFF = Backoff()
