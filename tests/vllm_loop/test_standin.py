"""vllm-check's stand-in for the product, driven by the engine client the plugin uses: it answers
the policy and long-polls a change, and keeps the boot and the records posted to it."""

from __future__ import annotations

import threading

from helios_client import PolicyWatcher, TelemetryReporter, upload_boot

from vllm_loop.standin import RECIPE, Standin


def test_the_plugins_client_follows_its_policy_and_posts_its_boot_and_records() -> None:
    standin = Standin("cost")
    try:
        watcher = PolicyWatcher(standin.url, RECIPE, "t", wait_s=5)
        changed = threading.Event()
        watcher.on_change(lambda p: changed.set())
        assert (watcher.start().policy, standin.read_version) == ("cost", 1)
        standin.set_policy("rule")
        assert changed.wait(5) and watcher.current is not None
        assert (watcher.current.policy, watcher.current.version, standin.read_version) == ("rule", 2, 2)
        watcher.stop()

        boot = upload_boot(standin.url, RECIPE, "t", [{"prefill": 64, "decode": 0, "ms": 1.0}], {"device": "cpu"})
        assert boot["id"] == 1 and standin.boots[0]["catalog"][0]["prefill"] == 64
        with TelemetryReporter(standin.url, RECIPE, "t", "vllm-check", flush_on_exit=False) as reporter:
            reporter.add({"type": "launch", "t_ms": 1.0, "request": "cmpl-hc0x7-0", "graph": 64, "start": 0,
                          "end": 64, "padded": 0, "chooser": "rule", "ms": 1.0, "policy": "rule", "version": 2})  # fmt: skip
        assert [r["request"] for r in standin.records] == ["cmpl-hc0x7-0"]
    finally:
        standin.close()
