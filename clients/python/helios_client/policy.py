"""`PolicyWatcher`: a recipe's active prefill policy, followed in the background.

A thread long-polls `GET /api/recipes/<recipe>/policy?wait=<s>` with `If-None-Match: "v<version>"`
(the server answers as soon as the version changes, or 304 at the deadline), backs off with jitter
when the server cannot be reached, and keeps the newest policy where the engine's scheduler reads
it without blocking (`current`), calling the callbacks registered with `on_change` on each change.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .http import ApiError, Backoff, Connection

log = logging.getLogger(__name__)

# The watcher probes an unreachable server often: one small GET every 1.5 s at most, so it follows
# a decision applied during an outage within ~2 s of the server's return (with the reporter's 30 s
# cap it took up to 32 s). A thousand engines probing a server that is away cost it nothing; their
# jitter spreads the first reads after its return over 1.5 s.
POLICY_BACKOFF = Backoff(first_s=0.25, maximum_s=1.5)


@dataclass(frozen=True)
class Policy:
    """What the server answered: the policy to run from the next prefill decision, and its version;
    `capacities`, the recipe's solo prefill capacities (empty from a server that names none)."""

    recipe: str
    policy: str
    version: int
    decided_at: str | None
    decision: int | None
    capacities: tuple[int, ...] = ()

    @property
    def etag(self) -> str:
        return f'"v{self.version}"'

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Policy:
        capacities = tuple(int(c) for c in body.get("capacities") or ())
        return cls(
            body["recipe"],
            body["policy"],
            int(body["version"]),
            body.get("decided_at"),
            body.get("decision"),
            capacities,
        )


Callback = Callable[[Policy], None]


class PolicyWatcher:
    """Follows one recipe's policy. `start()` reads it once (raising if the server refuses or
    cannot be reached within `first_timeout_s`), then long-polls in a daemon thread; `stop()` ends it.

    >>> watcher = PolicyWatcher("https://helios.example.org", "llama-8b", token)   # doctest: +SKIP
    >>> watcher.on_change(lambda p: scheduler.set_policy(p.policy, p.version))      # doctest: +SKIP
    >>> watcher.start().policy                                                      # doctest: +SKIP
    'cost'
    """

    def __init__(
        self,
        base_url: str,
        recipe: str,
        token: str,
        *,
        wait_s: float = 25.0,
        backoff: Backoff = POLICY_BACKOFF,
        timeout_s: float = 10.0,
    ) -> None:
        if not 0 < wait_s <= 30:
            raise ValueError("wait_s must be in (0, 30]: the server's long-poll bound")
        self.path = f"/api/recipes/{urllib.parse.quote(recipe, safe='')}/policy"
        self._http = Connection(base_url, token)
        self.wait_s, self.backoff, self.timeout_s = wait_s, backoff, timeout_s
        self._current: Policy | None = None
        self._callbacks: list[Callback] = []
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.failures = 0  # consecutive failed polls (0 while the server answers)

    @property
    def current(self) -> Policy | None:
        """The newest policy read (None before `start`); one attribute read, never blocks."""
        return self._current

    def on_change(self, callback: Callback) -> None:
        """Call `callback(policy)` in the watcher's thread on every change after the first read."""
        self._callbacks.append(callback)

    def poll(self, wait_s: float = 0) -> Policy | None:
        """One read (long-polled when `wait_s` > 0): the new policy, or None when unchanged (304)."""
        known = self._current
        headers = {"If-None-Match": known.etag} if known else {}
        path = f"{self.path}?wait={wait_s:g}" if wait_s else self.path
        answer = self._http.request(path, timeout_s=wait_s + self.timeout_s, headers=headers)
        if answer.status == 304:
            return None
        policy = Policy.from_json(json.loads(answer.body))
        self._current = policy
        if known is not None and policy.version != known.version:
            for callback in list(self._callbacks):
                try:
                    callback(policy)
                except Exception:  # an engine's callback must not stop the watcher
                    log.exception("policy callback failed")
        return policy

    def start(self, *, first_timeout_s: float = 30.0) -> Policy:
        """Read the policy now (retrying a server that cannot be reached, up to `first_timeout_s`), then follow it."""
        deadline = threading.Event()
        timer = threading.Timer(first_timeout_s, deadline.set)
        timer.daemon = True
        timer.start()
        attempt = 0
        try:
            while True:
                try:
                    first = self.poll()
                    break
                except OSError:
                    if deadline.is_set():
                        raise
                    deadline.wait(self.backoff.delay(attempt))
                    attempt += 1
        finally:
            timer.cancel()
        assert first is not None  # no If-None-Match was sent
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"helios-policy-{self.path}")
        self._thread.start()
        return first

    def stop(self, timeout_s: float = 1.0) -> None:
        """Stop following (a long-poll in flight is abandoned: the thread is a daemon)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout_s)  # it closes its connection as it ends
        else:
            self._http.close()

    def __enter__(self) -> PolicyWatcher:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            self._follow()
        finally:
            self._http.close()

    def _follow(self) -> None:
        while not self._stopping.is_set():
            try:
                self.poll(self.wait_s)
                self.failures = 0
            except (OSError, ValueError, KeyError, ApiError) as exc:
                if self._stopping.is_set():
                    return
                # ApiError too: a revoked token (401) or a removed recipe (404) may be put right
                # by an operator; the engine keeps its last policy meanwhile, and says so.
                log.warning("policy read failed (%s); keeping %s", exc, self._current)
                self._stopping.wait(self.backoff.delay(self.failures))
                self.failures += 1
