"""HTTP with the Helios API (a kept-alive connection per thread), and the backoff both background threads use."""

from __future__ import annotations

import http.client
import json
import random
import urllib.parse
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


class Connection:
    """One kept-alive HTTP(S) connection to the API, for the one thread that uses it (the
    watcher's, the reporter's): a new TCP (and TLS) handshake per request would cost the engine
    and the server more than most batches do. A request on a connection the server closed while
    it idled is sent once more on a new one (a repeated GET or batch POST is harmless: batches
    are stored once)."""

    def __init__(self, base_url: str, token: str) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.https, self.host, self.port = parts.scheme == "https", parts.hostname, parts.port
        self.prefix = parts.path.rstrip("/")
        self.token = token
        self._conn: http.client.HTTPConnection | None = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(
        self, path: str, *, timeout_s: float, data: bytes | None = None, headers: dict[str, str] | None = None
    ) -> Answer:
        """One request; 2xx and 304 come back as an `Answer`, 4xx raises `ApiError`, and 5xx or a
        network failure raise `OSError` (what a caller retries)."""
        sent = {"Authorization": f"Bearer {self.token}", "User-Agent": USER_AGENT, **(headers or {})}
        for attempt in (0, 1):
            reused = self._conn is not None
            conn = self._conn or self._open()
            try:
                if conn.sock is not None:
                    conn.sock.settimeout(timeout_s)
                conn.timeout = timeout_s
                conn.request("POST" if data is not None else "GET", self.prefix + path, body=data, headers=sent)
                response = conn.getresponse()
                body = response.read()
            except (http.client.HTTPException, OSError) as exc:
                self.close()
                if reused and attempt == 0 and isinstance(exc, _STALE):
                    continue
                raise OSError(f"{self.host}: {exc}") from exc
            if response.will_close:
                self.close()
            return _answer(response.status, dict(response.getheaders()), body)
        raise AssertionError("unreachable")

    def _open(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        self._conn = cls(self.host, self.port)
        return self._conn


# What a connection the server closed while it idled looks like on the next request.
_STALE = (http.client.RemoteDisconnected, http.client.BadStatusLine, ConnectionResetError, BrokenPipeError)


def _answer(status: int, headers: dict[str, str], body: bytes) -> Answer:
    if 200 <= status < 300 or status == 304:
        return Answer(status, headers, body)
    if 400 <= status < 500:
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = {"error": body[:500].decode("utf-8", "replace")}
        raise ApiError(status, parsed if isinstance(parsed, dict) else {"error": parsed})
    raise OSError(f"HTTP {status}")


DEFAULT_BACKOFF = Backoff()
