"""The plugin's side of the product, off the step path: the policy watcher (long-poll), the
telemetry reporter (spooled), and the boot upload, each on its own background thread.

`Link.start` waits up to `FIRST_READ_S` for the recipe's policy (the engine is still starting: its
first requests are then planned by the recipe, and recorded); a product that has not answered by
then is read in the background, and until it answers the planner knows no policy and vLLM chooses
every chunk (and no record is made: a record must name the version that planned it).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from helios_client import ApiError, Backoff, PolicyWatcher, TelemetryReporter, upload_boot
from helios_client.policy import Policy

from scheduler_core.catalog import Catalog

from .planning import SoloPlanner
from .settings import Settings

log = logging.getLogger("vllm.helios")  # under vLLM's logger: its handlers and level

FIRST_READ_S = 15.0


class Link:
    def __init__(self, settings: Settings, planner: SoloPlanner, *, backoff: Backoff | None = None) -> None:
        self.settings, self.planner = settings, planner
        self.backoff = backoff or Backoff(first_s=1.0, maximum_s=30.0)
        # The records come from the ledger, whose shape its tests hold against `helios_client.records`
        # (and the product checks every batch): checked again here, in the step path, each cost about
        # 50 us on a busy CPU, the largest part of the plugin's own time at one request at a time.
        self.reporter = TelemetryReporter(
            settings.url, settings.recipe, settings.token, settings.engine, spool=settings.spool, validate=False
        )
        self.watcher = PolicyWatcher(settings.url, settings.recipe, settings.token)
        self.watcher.on_change(self._policy_changed)
        self.boot: dict[str, Any] | None = None
        self.capacities: tuple[int, ...] = ()  # the recipe's, as its policy answer names them
        self._stopping = threading.Event()
        self._known = threading.Event()  # a policy was read

    def start(self, wait_s: float = FIRST_READ_S) -> bool:
        """Follow the recipe's policy; whether it was read within `wait_s` (else it is read later)."""
        threading.Thread(target=self._follow, daemon=True, name="helios-connect").start()
        return self._known.wait(wait_s)

    def stop(self) -> None:
        """At the engine's shutdown: post what is queued for up to 2 s, then leave the rest in the
        spool for the next start. vLLM runs this only when it gives its engine core time to stop
        (`--shutdown-timeout` N > 0; with its default 0 the core is killed at once, and the
        records of the last half second, not yet sealed into a batch, are lost)."""
        self._stopping.set()
        self.watcher.stop()
        self.reporter.close(timeout_s=2.0)

    def upload(self, catalog: Catalog, provenance: dict[str, Any]) -> threading.Thread:
        """Store the measured catalog as a boot (retried until the product takes or refuses it);
        later batches name it."""
        thread = threading.Thread(target=self._upload, args=(catalog, provenance), daemon=True, name="helios-boot")
        thread.start()
        return thread

    def _follow(self) -> None:
        attempt = 0
        while not self._stopping.is_set():
            try:
                first = self.watcher.start(first_timeout_s=10.0)
            except (OSError, ApiError, ValueError, KeyError) as exc:
                log.warning(
                    "helios: policy of %r not read from %s (%s); vLLM chooses chunks meanwhile",
                    self.settings.recipe,
                    self.settings.url,
                    exc,
                )
                self._stopping.wait(self.backoff.delay(attempt))
                attempt += 1
                continue
            self._policy_changed(first)
            return

    def _policy_changed(self, policy: Policy) -> None:
        self.capacities = policy.capacities
        self.planner.set_policy(policy.policy, policy.version)
        self._known.set()
        log.info(
            "helios: recipe %r policy %s (version %d) plans the next solo prefills",
            policy.recipe,
            policy.policy,
            policy.version,
        )

    def _upload(self, catalog: Catalog, provenance: dict[str, Any]) -> None:
        attempt = 0
        while not self._stopping.is_set():
            try:
                self.boot = upload_boot(
                    self.settings.url, self.settings.recipe, self.settings.token, catalog.to_dicts(), provenance
                )
            except ApiError as exc:
                log.error("helios: boot refused (%s); cost plans from the measured catalog all the same", exc)
                return
            except OSError as exc:
                log.warning("helios: boot not uploaded (%s); retrying", exc)
                self._stopping.wait(self.backoff.delay(attempt))
                attempt += 1
                continue
            self.reporter.boot = int(self.boot["id"])
            log.info("helios: boot %d stored for %r", self.reporter.boot, self.settings.recipe)
            return
