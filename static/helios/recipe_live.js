// The live recipe page: numbered frames over /ws/recipes/<name>/live/, a rolling window of at most
// WINDOW_FRAMES frames and MAX_POINTS points per trace, a marker at each policy change, and the
// latest decision's before/after panel. After a reconnect the server refills from the last frame
// number this page saw, so the numbers never have a hole (data-gaps counts any that would).
(function () {
  "use strict";
  const root = document.getElementById("live");
  if (!root) return;
  const WINDOW_MS = 5 * 60 * 1000;
  const MAX_POINTS = 4000;
  const WINDOW_FRAMES = 600;
  const colours = JSON.parse(document.getElementById("capacity-colours").textContent);
  const state = { lastSeq: 0, frames: [], changes: [], gaps: 0, count: 0, perSecond: new Map(), dirty: false, panelAt: 0 };

  function colour(capacity) { return colours[String(capacity)] || "#7f7f7f"; }
  function time(ms) { return new Date(ms); }

  const layouts = {
    "fig-chunks": ["Prefill chunks (graph capacity; colour = capacity)", "tokens", "log"],
    "fig-ttft": ["TTFT per finished request", "ms", "log"],
    "fig-itl": ["Inter-token latency per batch (p50, p99)", "ms", "log"],
    "fig-rate": ["Prefill launches per second", "launches/s", "linear"],
    "fig-padding": ["Padding share of prefill tokens", "share", "linear"],
  };
  for (const [id, [title, unit, scale]] of Object.entries(layouts)) {
    Plotly.newPlot(id, [], {
      title: { text: title }, height: 260, margin: { l: 60, r: 20, t: 40, b: 40 },
      xaxis: { type: "date" }, yaxis: { title: { text: unit }, type: scale, rangemode: "tozero" },
      showlegend: id === "fig-itl" || id === "fig-chunks",
    }, { displaylogo: false, responsive: true });
  }

  function markers() {
    const shapes = [], annotations = [];
    for (const c of state.changes) {
      shapes.push({ type: "line", xref: "x", yref: "paper", x0: time(c.decided_at), x1: time(c.decided_at), y0: 0, y1: 1,
                    line: { color: "#444", width: 1, dash: "dot" } });
      annotations.push({ xref: "x", yref: "paper", x: time(c.decided_at), y: 1, yanchor: "bottom", showarrow: false,
                         text: `v${c.version}: ${c.policy}` + (c.decision ? ` (decision #${c.decision})` : ""),
                         font: { size: 10 }, bgcolor: "rgba(255,255,255,0.8)" });
    }
    return { shapes, annotations };
  }

  function redraw() {
    if (!state.dirty) return;
    state.dirty = false;
    const newest = state.frames.length ? state.frames[state.frames.length - 1].t1 : Date.now();
    const since = newest - WINDOW_MS;
    state.frames = state.frames.filter((f) => f.t1 >= since).slice(-WINDOW_FRAMES);
    const chunks = state.frames.flatMap((f) => f.chunks).filter((p) => p[0] >= since).slice(-MAX_POINTS);
    const ttft = state.frames.flatMap((f) => f.ttft).filter((p) => p[0] >= since).slice(-MAX_POINTS);
    const itl = state.frames.filter((f) => f.itl_p50 !== null && f.itl_p50 !== undefined);
    const padding = state.frames.filter((f) => f.padding_share !== null && f.padding_share !== undefined);
    for (const second of state.perSecond.keys()) if (second * 1000 < since) state.perSecond.delete(second);
    const seconds = [...state.perSecond.keys()].sort((a, b) => a - b);
    const m = markers();
    const relayout = (id, traces) => Plotly.react(id, traces, Object.assign({}, document.getElementById(id).layout, m));
    const capacities = [...new Set(chunks.map((p) => p[1]))].sort((a, b) => a - b);
    relayout("fig-chunks", capacities.map((c) => {
      const mine = chunks.filter((p) => p[1] === c);
      return { type: "scatter", mode: "markers", name: String(c), x: mine.map((p) => time(p[0])), y: mine.map((p) => p[1]),
               marker: { size: 5, color: colour(c) } };
    }));
    relayout("fig-ttft", [{ type: "scatter", mode: "markers", name: "TTFT", x: ttft.map((p) => time(p[0])),
      y: ttft.map((p) => p[1]), marker: { size: 4 } }]);
    relayout("fig-itl", [
      { type: "scatter", mode: "lines", name: "p50", x: itl.map((f) => time(f.t1)), y: itl.map((f) => f.itl_p50) },
      { type: "scatter", mode: "lines", name: "p99", x: itl.map((f) => time(f.t1)), y: itl.map((f) => f.itl_p99) },
    ]);
    relayout("fig-rate", [{ type: "bar", name: "launches/s", x: seconds.map((s) => time(s * 1000)),
      y: seconds.map((s) => state.perSecond.get(s)) }]);
    relayout("fig-padding", [{ type: "scatter", mode: "lines", name: "padding", x: padding.map((f) => time(f.t1)),
      y: padding.map((f) => f.padding_share) }]);
  }

  function take(frames) {
    for (const f of frames) {
      if (f.seq <= state.lastSeq) continue;
      if (state.lastSeq && f.seq !== state.lastSeq + 1) state.gaps += f.seq - state.lastSeq - 1;
      state.lastSeq = f.seq;
      state.count += 1;
      if (f.chunks === undefined) continue;  // a frame stored before frames were drawn: numbered, nothing to plot
      state.frames.push(f);
      for (const [second, n] of f.per_second) state.perSecond.set(second, (state.perSecond.get(second) || 0) + n);
    }
    root.dataset.lastSeq = String(state.lastSeq);
    root.dataset.frames = String(state.count);
    root.dataset.gaps = String(state.gaps);
    document.getElementById("frame-count").textContent = String(state.count);
    document.getElementById("last-seq").textContent = String(state.lastSeq);
    document.getElementById("no-telemetry").hidden = state.count > 0;
    state.dirty = true;
    if (Date.now() - state.panelAt > 2000) refreshPanel();  // the after side fills as telemetry comes
  }

  function cell(side, key, digits) {
    const v = side[key];
    return v === null || v === undefined ? "—" : (digits === undefined ? String(v) : Number(v).toFixed(digits));
  }

  function showPanel(panel) {
    const body = document.getElementById("panel-body");
    if (!panel.decision) { body.textContent = "No decision has been applied to this recipe yet."; return; }
    const rows = [
      ["TTFT p50 (ms)", "ttft_p50_ms", 2, "requests"], ["TTFT p99 (ms)", "ttft_p99_ms", 2, "requests"],
      ["launches per request", "launches_per_request", 2, "requests"], ["padding share", "padding_share", 3, "launches"],
      ["most sequences for one prompt length", "sequences_per_length_max", undefined, "prompt_lengths"],
    ];
    const note = (side) => side.too_few ? ` <em class="too-few">too few samples (${side.requests} requests, fewer than ${panel.min_samples})</em>` : "";
    body.innerHTML = `<p id="panel-label">${panel.label}</p><table id="panel-table"><thead><tr><th></th>` +
      `<th>before: v${panel.before.version} ${panel.before.policy || ""}</th><th>after: v${panel.after.version} ${panel.after.policy || ""}</th></tr></thead><tbody>` +
      rows.map(([label, key, digits, count]) => `<tr><td>${label}</td><td>${cell(panel.before, key, digits)} <small>n=${panel.before[count]}</small></td>` +
        `<td>${cell(panel.after, key, digits)} <small>n=${panel.after[count]}</small></td></tr>`).join("") +
      `</tbody></table><p>${note(panel.before)}${note(panel.after)}</p>`;
  }

  function refreshPanel() {
    state.panelAt = Date.now();
    fetch(root.dataset.panelUrl, { credentials: "same-origin" }).then((r) => r.json()).then(showPanel).catch(console.error);
  }

  window.heliosLive(() => root.dataset.wsPath + "?after=" + state.lastSeq, {
    open: () => { document.getElementById("connection").textContent = "live"; },
    close: (why) => { document.getElementById("connection").textContent = why; },
    message: (msg) => {
      if (msg.type === "frames") take(msg.frames);
      else if (msg.type === "policies") {
        state.changes = msg.changes;
        document.getElementById("live-policy").textContent = `${msg.current.policy} v${msg.current.version}`;
        state.dirty = true;
        refreshPanel();
      }
    },
  });
  setInterval(redraw, 250);
  setInterval(refreshPanel, 10000);
})();
