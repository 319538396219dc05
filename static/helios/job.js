// The job page: one websocket, numbered events (replayed, then live), reconnects by itself and
// resumes after the last event it saw, so nothing is lost across a reload or a Redis restart.
(function () {
  "use strict";
  const root = document.getElementById("job");
  if (!root) return;
  const jobId = root.dataset.jobId;
  const kind = root.dataset.kind;
  const $ = (id) => document.getElementById(id);
  let lastSeq = 0;
  let finished = false;
  let retry = 500;
  const arms = [];          // pr22 rows as they arrive
  const measurements = { x: [], y: [] };
  let chartReady = false;
  let eventCount = 0;
  const MAX_LOG = 300;

  function fmt(side) { return side.launches + " / " + Number(side.ttft_ms).toFixed(2); }

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

  function logEvent(ev) {
    eventCount += 1;
    $("event-count").textContent = String(eventCount);
    const list = $("events");
    const li = document.createElement("li");
    li.value = ev.seq;
    const copy = Object.assign({}, ev);
    delete copy.seq; delete copy.ts;
    li.textContent = JSON.stringify(copy);
    list.appendChild(li);
    while (list.children.length > MAX_LOG) list.removeChild(list.firstChild);
  }

  function addArm(ev) {
    // Idempotent by (arm, catalog): a finished job's page gets each arm from the stored result
    // and from the replayed events, in whichever order they land.
    const key = ev.arm + "|" + ev.catalog;
    const index = arms.findIndex((a) => a.arm + "|" + a.catalog === key);
    const tr = document.createElement("tr");
    for (const v of [ev.arm, ev.prompt_tokens, ev.catalog, fmt(ev.cost), fmt(ev.rule),
                     (ev.delta_ms >= 0 ? "+" : "") + Number(ev.delta_ms).toFixed(2)]) {
      const td = document.createElement("td");
      td.textContent = v;
      tr.appendChild(td);
    }
    const tbody = document.querySelector("#pr22-table tbody");
    if (index >= 0) {
      arms[index] = ev;
      tbody.replaceChild(tr, tbody.children[index]);
    } else {
      arms.push(ev);
      tbody.appendChild(tr);
    }
    drawPr22();
  }

  function drawPr22() {
    if (!window.Plotly) return;
    const x = arms.map((a) => a.arm + " " + a.catalog);
    const trace = (policy, label, color) => ({
      type: "bar", name: policy + " (" + label + ")", x: x, y: arms.map((a) => a[policy].ttft_ms),
      text: arms.map((a) => fmt(a[policy])), marker: { color: color } });
    Plotly.react("chart", [trace("cost", "before", "#636efa"), trace("rule", "after", "#ef553b")],
      { title: { text: "TTFT per arm: cost (before) vs rule (after)" }, barmode: "group",
        yaxis: { title: { text: "TTFT (ms)" } }, height: 360 }, { displaylogo: false });
  }

  function addMeasurement(ev) {
    // Generic live chart: any numeric `ms`, `value` or `ttft_ms` a measurement carries.
    const y = [ev.ms, ev.value, ev.ttft_ms].find((v) => typeof v === "number");
    if (y === undefined || !window.Plotly) return;
    const x = measurements.x.length;
    if (!chartReady) {
      Plotly.newPlot("chart", [{ type: "scattergl", mode: "lines+markers", x: [x], y: [y], name: ev.name || "measurement" }],
        { title: { text: "Measurements" }, height: 320 }, { displaylogo: false });
      chartReady = true;
    } else {
      Plotly.extendTraces("chart", { x: [[x]], y: [[y]] }, [0], 5000);
    }
    measurements.x.push(x);
  }

  function showResult(result, summaryText) {
    $("result").hidden = false;
    $("result-text").hidden = !summaryText;
    $("result-text").textContent = summaryText || "";
    $("result-json").textContent = JSON.stringify(result, null, 2);
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
    if (kind === "pr22" && result && result.arms) result.arms.forEach(addArm);
    if (result && result.series && Array.isArray(result.prompt_tokens) && window.Plotly && !chartReady) drawSweep(result);
  }

  function drawSweep(result) {
    // A sweep: TTFT against prompt length, one line per (catalog, policy).
    const traces = [];
    for (const [catalog, byPolicy] of Object.entries(result.series)) {
      for (const [policy, values] of Object.entries(byPolicy)) {
        if (!values || !Array.isArray(values.ttft_ms)) continue;
        traces.push({ type: "scattergl", mode: "lines", name: catalog + " " + policy, x: result.prompt_tokens, y: values.ttft_ms });
      }
    }
    if (traces.length) Plotly.newPlot("chart", traces, { title: { text: "TTFT vs prompt length" },
      xaxis: { type: "log", title: { text: "prompt tokens" } }, yaxis: { title: { text: "TTFT (ms)" } }, height: 380 });
  }

  async function loadResult() {
    const response = await fetch("/api/jobs/" + jobId + "/", { credentials: "same-origin" });
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
      case "arm_result": addArm(ev); break;
      case "measurement": addMeasurement(ev); break;
      case "done": setStatus("done"); setProgress(1, 1); loadResult(); break;
      case "failed": case "cancelled":
        setStatus(ev.type === "failed" ? "failed" : "cancelled");
        $("job-error").hidden = false; $("job-error").textContent = ev.reason || ev.type; break;
      case "error": console.warn("server:", ev); return;
      case "pong": return;
    }
    if (ev.type !== "measurement" || eventCount < MAX_LOG) logEvent(ev);
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + location.host + root.dataset.wsPath + "?after=" + lastSeq);
    ws.onopen = () => { $("connection").textContent = "live"; retry = 500; };
    ws.onmessage = (msg) => { try { handle(JSON.parse(msg.data)); } catch (e) { console.error(e); } };
    ws.onclose = () => {
      $("connection").textContent = finished ? "finished" : "reconnecting…";
      if (!finished) { setTimeout(connect, retry); retry = Math.min(retry * 2, 10000); }
    };
  }

  if (root.dataset.status === "done") { loadResult(); }
  connect();
})();
