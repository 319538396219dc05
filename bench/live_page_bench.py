"""The live recipe page in Chromium while an engine reports 10,000 launch records per second
(prints figures next to their targets; not a test).

This process plays the engine: it ingests batches of launch records through the same service the
telemetry API calls (`telemetry_ingest`: validated, folded into rollups, stored, its frame
published), so the web process (daphne) does what it does for every viewer: fan each frame out from
its one Redis subscription to the page's socket. The page is `/recipes/<name>/live` in Debian's
Chromium; an init script records, in the page, each frame's arrival minus the time it was
published (same machine clock) and every long task (PerformanceObserver 'longtask').

Targets (issue 11): frames reach the browser with p95 <= 250 ms, none lost, and no long task over
200 ms during a minute.

Run: .venv/bin/python bench/live_page_bench.py [--rate 10000] [--batch 500] [--seconds 60]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.engine_bench import batch_body, launch_records  # noqa: E402
from bench.support import free_port, percentile, serve, stop, throwaway_site  # noqa: E402
from bench.web_bench import ARGS, CHROMIUM  # noqa: E402
from heliosweb.stack import web_cmd  # noqa: E402

RECORDER = """
window.__bench = { lat: [], seqs: [], longtasks: [] };
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.__bench.longtasks.push(e.duration);
}).observe({ type: "longtask", buffered: true });
const NativeWebSocket = window.WebSocket;
window.WebSocket = function (url, protocols) {
  const ws = protocols === undefined ? new NativeWebSocket(url) : new NativeWebSocket(url, protocols);
  ws.addEventListener("message", (event) => {
    const now = Date.now();
    const msg = JSON.parse(event.data);
    if (msg.type !== "frames") return;
    for (const f of msg.frames) {
      window.__bench.seqs.push(f.seq);
      if (f.published_ms) window.__bench.lat.push(now - f.published_ms);
    }
  });
  return ws;
};
window.WebSocket.prototype = NativeWebSocket.prototype;
Object.assign(window.WebSocket, NativeWebSocket);
"""


def feed(recipe, rate: float, batch: int, seconds: float, sent: list[int]) -> None:
    """Ingest `rate` launch records per second in batches of `batch` for `seconds`."""
    from heliosweb.telemetry.ingest import telemetry_ingest

    per_second = rate / batch
    start, n = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        n += 1
        records = launch_records(batch, time.time() * 1000, n * batch)
        telemetry_ingest(recipe=recipe, data=batch_body("bench-engine", n, records))
        sent.append(n)
        time.sleep(max(0.0, start + n / per_second - time.perf_counter()))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=10_000.0, help="launch records per second")
    parser.add_argument("--batch", type=int, default=500, help="records per batch (one frame each)")
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    if not os.path.exists(CHROMIUM):
        print("live page: skipped (needs /usr/bin/chromium: apt-get install -y chromium)")
        return 0
    tmp, procs = throwaway_site("helios-live-page-bench-")
    from django.contrib.auth.models import User
    from django.test import Client
    from playwright.sync_api import expect, sync_playwright

    from heliosweb.recipes.services import recipe_ensure

    recipe = recipe_ensure(name="live")
    client = Client()
    client.force_login(User.objects.create_user("viewer"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    try:
        serve(web_cmd("127.0.0.1", port), port, dict(os.environ, PYTHONUNBUFFERED="1"), tmp / "web.log", procs)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            context = browser.new_context(viewport={"width": 1400, "height": 1200})
            context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": base}])
            page = context.new_page()
            page.add_init_script(RECORDER)
            page.goto(f"{base}/recipes/live/live")
            # A locator, not wait_for_function: a string predicate is eval, which the page's CSP refuses.
            expect(page.locator("#connection")).to_have_text("live")
            page.wait_for_timeout(1000)
            page.evaluate("window.__bench.longtasks = []")  # the page's own loading is not the stream's
            sent: list[int] = []
            engine = threading.Thread(target=feed, args=(recipe, args.rate, args.batch, args.seconds, sent))
            began = time.perf_counter()
            engine.start()
            engine.join()
            elapsed = time.perf_counter() - began
            page.wait_for_timeout(2000)  # the last frames' way to the page
            seen = page.evaluate("window.__bench")
            page.screenshot(path=str(tmp / "live-page.png"), full_page=True)
            page.set_viewport_size({"width": 390, "height": 844})
            page.wait_for_timeout(1000)  # the charts redraw to their narrower boxes
            page.screenshot(path=str(tmp / "live-page-390.png"), full_page=True)
            browser.close()
    finally:
        stop(procs)
    lost = len(set(sent) - set(seen["seqs"]))
    lat, tasks = seen["lat"], seen["longtasks"]
    print(
        f"live page: {len(sent)} frames of {args.batch} launch records in {elapsed:.1f} s "
        f"= {len(sent) * args.batch / elapsed:,.0f} records/s (asked {args.rate:,.0f}); {lost} frames lost (target 0)"
    )
    if lat:
        print(
            f"live page: frame latency from publish to the page p50 {statistics.median(lat):.0f} ms, "
            f"p95 {percentile(lat, 95):.0f} ms (target p95 <= 250 ms), over {len(lat)} live frames"
        )
    print(
        f"live page: {len(tasks)} long tasks"
        + (f" ({', '.join(f'{t:.0f}' for t in sorted(tasks)[-8:])} ms the longest)" if tasks else "")
        + "; target: none over 200 ms; "
        f"screenshot {tmp / 'live-page.png'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
