// The job page: one websocket, numbered events (replayed, then live), reconnects by itself and
// resumes after the last event it saw, so nothing is lost across a reload or a Redis restart.
// Figures come from GET /api/jobs/<id>/figures/ and grow as they declare: no kind is named here.
(function () {
  "use strict";
  const root = document.getElementById("job");
  if (!root) return;
  const jobId = root.dataset.jobId;
  const $ = (id) => document.getElementById(id);
  let lastSeq = 0;
  let finished = false;
  const renderedUnfinished = !["done", "failed", "cancelled"].includes(root.dataset.status);
  let eventCount = 0;
  const MAX_LOG = 300;
  const figures = new HeliosFigures.Live($("figures"), root.dataset.figuresUrl, "job-" + jobId);  // the page preloads its first answer (the picked pair's)

  function setStatus(status) {
    const el = $("job-status");
    el.textContent = status;
    el.className = "status status-" + status;
    root.dataset.status = status;
    if (["done", "failed", "cancelled"].includes(status)) {
      finished = true;
      const cancel = $("cancel-form");
      if (cancel) cancel.remove();
    }
  }

  function setProgress(done, total, message) {
    const pct = total > 0 ? Math.min(100, Math.floor((100 * done) / total)) : 0;
    $("job-progress").value = pct;
    $("job-percent").textContent = pct + "%";
    if (message !== undefined) $("job-message").textContent = message;
  }

  // The log shows the last MAX_LOG events and counts every one. Events are written together in an
  // animation frame at most every LOG_GAP_MS (one DOM update, not one per event): at 500 events/s a
  // write per frame re-laid out the list sixty times a second, inside Plotly's own layout reads.
  const LOG_GAP_MS = 250;
  let pendingLog = [];
  let logFrame = 0;
  let logTimer = null;
  let loggedAt = -Infinity;
  function logEvent(ev) {
    eventCount += 1;
    pendingLog.push(ev);
    if (pendingLog.length > 2 * MAX_LOG) pendingLog = pendingLog.slice(-MAX_LOG);
    if (logFrame || logTimer) return;
    const wait = loggedAt + LOG_GAP_MS - performance.now();
    if (wait > 0) logTimer = setTimeout(() => { logTimer = null; logFrame = requestAnimationFrame(writeLog); }, wait);
    else logFrame = requestAnimationFrame(writeLog);
  }

  function writeLog() {
    logFrame = 0;
    loggedAt = performance.now();
    const list = $("events");
    const lines = document.createDocumentFragment();
    for (const ev of pendingLog.slice(-MAX_LOG)) {
      const li = document.createElement("li");
      li.value = ev.seq;
      const copy = Object.assign({}, ev);
      delete copy.seq; delete copy.ts;
      li.textContent = JSON.stringify(copy);
      lines.appendChild(li);
    }
    pendingLog = [];
    const overflow = list.children.length + lines.childNodes.length - MAX_LOG;
    if (overflow >= list.children.length) list.textContent = "";
    else for (let i = 0; i < overflow; i++) list.removeChild(list.firstChild);
    list.appendChild(lines);
    $("event-count").textContent = String(eventCount);
  }

  // The result's indented JSON is written when its <details> is open, not in the task that shows
  // the result: a 19,500-request simulate's is 11 MB of text, 70-95 ms to indent on the 2-core
  // bench machine at rest and more to lay out, in a task that went over 300 ms under load.
  let unwritten;  // the result, until written
  let pending = false;
  function writeJson() {
    const pre = $("result-json");
    if (!pending || !pre.closest("details").open) return;
    pre.textContent = JSON.stringify(unwritten, null, 2);
    pending = false; unwritten = undefined;
  }
  $("result-json").closest("details").addEventListener("toggle", writeJson);

  function showResult(result, summaryText) {
    $("result").hidden = false;
    $("result-text").hidden = !summaryText;
    $("result-text").textContent = summaryText || "";
    $("result-json").textContent = "";
    unwritten = result; pending = true;
    writeJson();
    const summary = $("result-summary");
    summary.textContent = "";
    if (result && typeof result === "object" && !Array.isArray(result)) {
      const dl = document.createElement("dl");
      for (const [k, v] of Object.entries(result)) {
        if (v !== null && typeof v === "object") continue;
        const dt = document.createElement("dt"); dt.textContent = k;
        const dd = document.createElement("dd"); dd.textContent = String(v);
        dl.appendChild(dt); dl.appendChild(dd);
      }
      summary.appendChild(dl);
    }
  }

  // What the page says only once the job has ended (its pair picker, its CSV and trace downloads:
  // those marked data-when-done): read from the page itself, as the server now renders it.
  async function loadWhenDone() {
    const response = await fetch(location.pathname + location.search, { credentials: "same-origin" });
    if (!response.ok) return;
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    for (const el of document.querySelectorAll("[data-when-done]")) {
      const now = fresh.getElementById(el.id);
      if (now) el.replaceWith(document.importNode(now, true));
    }
  }

  async function loadResult() {  // its text compares the pair the figures do
    const pair = new URL(root.dataset.figuresUrl, location.href).search;
    const response = await fetch("/api/jobs/" + jobId + "/" + pair, { credentials: "same-origin" });
    if (!response.ok) return;
    const job = await response.json();
    setStatus(job.status);
    setProgress(job.progress.done, job.progress.total, job.progress.message);
    if (job.status === "done") { setProgress(1, 1); showResult(job.result, job.summary); }
    if (job.error) { $("job-error").hidden = false; $("job-error").textContent = job.error; }
  }

  function handle(ev) {
    if (typeof ev.seq === "number") {
      if (ev.seq <= lastSeq) return;
      lastSeq = ev.seq;
    }
    switch (ev.type) {
      case "progress":
        setProgress(ev.done, ev.total, ev.message);
        if (root.dataset.status === "queued") setStatus("running");
        break;
      case "done": setStatus("done"); setProgress(1, 1); loadResult(); figures.load(); if (renderedUnfinished) loadWhenDone(); break;
      case "failed": case "cancelled":
        setStatus(ev.type === "failed" ? "failed" : "cancelled");
        $("job-error").hidden = false; $("job-error").textContent = ev.reason || ev.type;
        figures.load();
        break;
      case "error": console.warn("server:", ev); return;
      case "pong": return;
    }
    figures.take(ev);
    logEvent(ev);
  }

  function connect() {
    window.heliosLive(() => root.dataset.wsPath + "?after=" + lastSeq, {
      open: () => { $("connection").textContent = "live"; },
      message: handle,
      close: (why) => { $("connection").textContent = why; },
      finished: () => finished,
    });
  }

  if (root.dataset.status === "done") loadResult();
  figures.load().then(connect);
})();
