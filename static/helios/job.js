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
  const arms = [];          // pr22 rows as they arrive
  const measurements = { x: [], y: [] };
  let chartReady = false;
  let resultCharted = false;
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
    if (!window.Plotly || resultCharted) return;  // a finished result's chart wins over replayed measurements
    if (typeof ev.median_ms === "number") return addShape(ev);
    // Any other numeric series (`ms`, `value` or `ttft_ms`): a line that grows as events land.
    const y = [ev.ms, ev.value, ev.ttft_ms].find((v) => typeof v === "number");
    if (y === undefined) return;
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

  // A capture: one bar per graph shape (median, p10..p90 as error bars), a trace per boot.
  const shapes = new Map();
  function shapeLabel(ev) {
    if (ev.decode === 0) return "prefill " + ev.prefill;
    return ev.prefill === 0 ? "decode " + ev.decode : "mixed " + ev.prefill + "+" + ev.decode;
  }
  function addShape(ev) {
    const boot = "boot " + (ev.boot || 0);
    if (!shapes.has(boot)) shapes.set(boot, new Map());
    shapes.get(boot).set(shapeLabel(ev), ev);  // keyed: a replayed event replaces, never duplicates
    const traces = Array.from(shapes.entries()).map(([name, byShape]) => {
      const rows = Array.from(byShape.entries());
      return { type: "bar", name: name, x: rows.map(([label]) => label), y: rows.map(([, m]) => m.median_ms),
               error_y: { type: "data", symmetric: false, array: rows.map(([, m]) => m.p90_ms - m.median_ms),
                          arrayminus: rows.map(([, m]) => m.median_ms - m.p10_ms) },
               marker: { color: rows.map(([, m]) => (m.drifted ? "#ef553b" : "#636efa")) } };
    });
    Plotly.react("chart", traces, { title: { text: "Graph durations as measured (median, p10-p90; red: drifted)" },
      barmode: "group", yaxis: { title: { text: "ms" } }, height: 360 }, { displaylogo: false });
    chartReady = true;
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
    if (kind === "ttft" && result && Array.isArray(result.arms) && window.Plotly) drawTtft(result.arms);
  }

  function drawTtft(arms) {
    // Real TTFT next to what the catalog predicted for the same launches, per prompt and policy.
    const x = arms.map((a) => a.prompt_tokens + " " + a.policy + " (" + a.launch_count + (a.launch_count === 1 ? " launch)" : " launches)"));
    const bar = (name, key, color) => ({ type: "bar", name: name, x: x, y: arms.map((a) => a[key]),
      text: arms.map((a) => Number(a[key]).toFixed(1)), marker: { color: color } });
    const traces = [bar("measured TTFT", "ttft_ms", "#00a676"), bar("predicted from the catalog", "predicted_ms", "#9aa5b1")];
    // Drift (or a given catalog) makes the belief differ from this boot's undisturbed medians: show both.
    if (arms.some((a) => Math.abs(a.table_ms - a.predicted_ms) > 1e-9)) {
      traces.push(bar("the same launches at undisturbed medians", "table_ms", "#636efa"));
    }
    Plotly.newPlot("chart", traces,
      { title: { text: "TTFT: measured on the model vs the harness's prediction" }, barmode: "group",
        yaxis: { title: { text: "ms" } }, height: 360 }, { displaylogo: false });
    chartReady = resultCharted = true;
  }

  function drawSweep(result) {
    // A sweep: TTFT per (catalog, policy) on top; below, what maintainers decide on: rule - cost.
    const traces = [];
    const colors = { clean: "#636efa", drift: "#ef553b", boot: "#00a676" };
    for (const [catalog, byPolicy] of Object.entries(result.series)) {
      for (const [policy, values] of Object.entries(byPolicy)) {
        if (Array.isArray(values)) {  // delta_ms
          traces.push({ type: "scattergl", mode: "lines", name: catalog + ": rule - cost", x: result.prompt_tokens, y: values,
                        xaxis: "x", yaxis: "y2", line: { color: colors[catalog] } });
        } else if (values && Array.isArray(values.ttft_ms)) {
          traces.push({ type: "scattergl", mode: "lines", name: catalog + " " + policy, x: result.prompt_tokens, y: values.ttft_ms,
                        line: { color: colors[catalog], dash: policy === "rule" ? "dot" : "solid" } });
        }
      }
    }
    if (!traces.length) return;
    Plotly.newPlot("chart", traces, { title: { text: "TTFT vs prompt length, and the rule's delta" }, height: 560,
      xaxis: { type: "log", title: { text: "prompt tokens" }, anchor: "y2" },
      yaxis: { type: "log", title: { text: "TTFT (ms)" }, domain: [0.52, 1] },
      yaxis2: { title: { text: "rule - cost (ms)" }, domain: [0, 0.42], zeroline: true } }, { displaylogo: false });
    chartReady = resultCharted = true;
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

  if (root.dataset.status === "done") { loadResult(); }
  window.heliosLive(() => root.dataset.wsPath + "?after=" + lastSeq, {
    open: () => { $("connection").textContent = "live"; },
    message: handle,
    close: (why) => { $("connection").textContent = why; },
    finished: () => finished,
  });
})();
