// The live recipe page: numbered frames over /ws/recipes/<name>/live/, a rolling window of at most
// five minutes, a marker at each policy change, the latest change's before/after panel and the
// simulated engine that runs (both re-read as telemetry comes, and every 10 s). After a reconnect the server refills from the last frame
// number this page saw, so the numbers never have a hole (data-gaps counts any that would).
(function () {
  "use strict";
  const root = document.getElementById("live");
  if (!root) return;
  const WINDOW_MS = 5 * 60 * 1000;
  // Per point series (each redraw re-renders every SVG marker, styled one by one). Past it a series
  // keeps the first point of each BIN_MS of the window: the same for old and new points, and the
  // same however often it is redrawn, so what came before a marker never thins away on an open page.
  const MAX_POINTS = 800;
  const BIN_MS = WINDOW_MS / MAX_POINTS;
  // TTFT, the verdict, per second: every request while a second has at most TTFT_EACH, else its
  // fastest, median (of a sample of TTFT_SAMPLE) and slowest: at most 900 markers in the window.
  const TTFT_EACH = 3, TTFT_SAMPLE = 32;
  const colours = JSON.parse(document.getElementById("capacity-colours").textContent);
  // Kept as they arrive, trimmed as they age: a redraw never walks every frame of the window again.
  const state = {
    lastSeq: 0, changes: [], gaps: 0, count: 0, dirty: false, panelAt: 0,
    // chunks: one point [second start (ms), capacity] per second a capacity ran in (at most the
    // window's seconds times the capacities, whatever the launch rate); the others, as they arrive.
    // ttft: second -> {n, min, max, sample} (points [t_ms, ms]).
    chunks: [], chunkSeen: new Set(), ttft: new Map(), itl: [], padding: [], perSecond: new Map(),
  };

  function colour(capacity) { return colours[String(capacity)] || "#7f7f7f"; }
  function time(ms) { return new Date(ms); }

  const layouts = {
    "fig-chunks": ["Graph capacities run each second", "tokens", "log"],
    "fig-ttft": ["TTFT per finished request", "ms", "log"],
    "fig-itl": ["Inter-token latency per batch (p50, p99)", "ms", "log"],
    "fig-rate": ["Prefill launches per second", "launches/s", "linear"],
    "fig-padding": ["Padding share of prefill tokens", "share", "linear"],
  };
  // An empty chart spans the window that ends now (not Plotly's default of the year 2000); on a
  // phone a long title breaks into two lines (Plotly never wraps one).
  function lastMinutes() { const now = Date.now(); return { type: "date", range: [time(now - WINDOW_MS), time(now)] }; }
  function fit(title) {
    if (root.clientWidth >= 640 || title.length <= 40) return title;
    const cut = title.lastIndexOf(" ", 40);
    return title.slice(0, cut) + "<br>" + title.slice(cut + 1);
  }
  const NO_REQUESTS = "no finished requests reported yet", NO_LAUNCHES = "no prefill launches reported yet";
  const EMPTY = { "fig-chunks": NO_LAUNCHES, "fig-ttft": NO_REQUESTS, "fig-itl": NO_REQUESTS, "fig-rate": NO_LAUNCHES, "fig-padding": NO_LAUNCHES };
  const emptyNote = (id) => ({ xref: "paper", yref: "paper", x: 0.5, y: 0.5, showarrow: false, text: EMPTY[id],
                               font: { color: "#595959" }, name: "empty" });
  const CONFIG = { displaylogo: false, responsive: true, showSendToCloud: false };
  const bases = {};  // each chart's own layout, which every redraw starts from
  for (const [id, [title, unit, scale]] of Object.entries(layouts)) {
    bases[id] = {
      // the title below the modebar's band (its buttons never cover it), as the job pages' figures
      title: { text: fit(title), x: 0, xanchor: "left", xref: "paper", y: 1, yanchor: "top", yref: "container", pad: { t: 30 } },
      height: 280, margin: { l: 60, r: 20, t: fit(title).includes("<br>") ? 84 : 66, b: 40 },
      xaxis: lastMinutes(), annotations: [emptyNote(id)],
      // Whole labels on log axes (20 and 50, not a small "2" and "5" after 10), as the job pages'
      // figures; Plotly picks the ticks, since an empty chart spans five decades.
      yaxis: { title: { text: unit }, type: scale, rangemode: "tozero", tickformat: scale === "log" ? "~g" : "" },
      showlegend: id === "fig-itl" || id === "fig-chunks",
    };
    // Each empty chart in a task of its own (five in one task blocked the page ~0.3 s at load); a
    // chart the first frames already drew is left as it is.
    setTimeout(() => { if (!document.getElementById(id).data) Plotly.newPlot(id, [], bases[id], CONFIG); }, 0);
  }

  // What made a change (as the server's panel label says it): a decision, or an emergency rollback.
  function cause(c) {
    if (c.decision) return `decision #${c.decision}`;
    return `${c.emergency ? "emergency rollback" : "changed"} by ${c.by}`;
  }

  function markers() {
    const shapes = [], annotations = [];
    for (const c of state.changes) {
      shapes.push({ type: "line", xref: "x", yref: "paper", x0: time(c.decided_at), x1: time(c.decided_at), y0: 0, y1: 1,
                    line: { color: "#444", width: 1, dash: "dot" } });
      annotations.push({ xref: "x", yref: "paper", x: time(c.decided_at), y: 1, yanchor: "bottom", xanchor: "right", showarrow: false,
                         text: `v${c.version}: ${c.policy} (${cause(c)})`,
                         font: { size: 10 }, bgcolor: "rgba(255,255,255,0.8)" });
    }
    return { shapes, annotations };
  }

  // Points are [t_ms, ...]: drop those older than `since`, and past `limit` keep the first point
  // of each BIN_MS (idempotent: a second trim keeps what the first kept).
  function trim(points, since, limit = MAX_POINTS) {
    let first = 0;
    while (first < points.length && points[first][0] < since) first += 1;
    let kept = first ? points.slice(first) : points;
    if (kept.length > limit) {
      const seen = new Set();
      kept = kept.filter((p) => { const bin = Math.floor(p[0] / BIN_MS); return !seen.has(bin) && seen.add(bin); });
    }
    return kept;
  }

  function addTtft(t, ms) {
    const second = Math.floor(t / 1000);
    let b = state.ttft.get(second);
    if (!b) state.ttft.set(second, (b = { n: 0, min: null, max: null, sample: [] }));
    b.n += 1;
    if (!b.min || ms < b.min[1]) b.min = [t, ms];
    if (!b.max || ms > b.max[1]) b.max = [t, ms];
    if (b.sample.length < TTFT_SAMPLE) b.sample.push([t, ms]);
    else { const j = Math.floor(Math.random() * b.n); if (j < TTFT_SAMPLE) b.sample[j] = [t, ms]; }  // reservoir
  }

  // [t_ms, ms, what] in time order, each second as the comment at TTFT_EACH says.
  function ttftPoints() {
    const out = [];
    for (const second of [...state.ttft.keys()].sort((a, b) => a - b)) {
      const b = state.ttft.get(second);
      if (b.n <= TTFT_EACH) { for (const [t, ms] of b.sample) out.push([t, ms, "a request"]); continue; }
      const sorted = b.sample.map((p) => p[1]).sort((x, y) => x - y);
      const median = sorted[Math.floor((sorted.length - 1) / 2)];
      out.push([b.min[0], b.min[1], `fastest of ${b.n} in this second`], [second * 1000 + 500, median, `median of ${b.n}`],
               [b.max[0], b.max[1], `slowest of ${b.n}`]);
    }
    return out.sort((x, y) => x[0] - y[0]);
  }

  function redraw() {
    if (!state.dirty) return;
    state.dirty = false;
    const changed = state.changes.map((c) => c.decided_at).filter((t) => typeof t === "number");  // ms
    const seconds = (map) => [...map.keys()];
    const lasts = ["chunks", "itl", "padding"].filter((k) => state[k].length).map((k) => state[k][state[k].length - 1][0])
      .concat(seconds(state.ttft).map((s) => s * 1000 + 999));
    const newest = lasts.length ? Math.max(...lasts, ...changed) : Date.now();
    const since = newest - WINDOW_MS;
    for (const key of ["itl", "padding"]) state[key] = trim(state[key], since);
    for (const second of seconds(state.ttft)) if (second * 1000 + 999 < since) state.ttft.delete(second);
    state.chunks = trim(state.chunks, since, Infinity);
    state.chunkSeen = new Set(state.chunks.map((p) => p[0] + ":" + p[1]));
    for (const second of state.perSecond.keys()) if (second * 1000 < since) state.perSecond.delete(second);
    const rate = seconds(state.perSecond).sort((a, b) => a - b);
    const ttft = ttftPoints();
    const m = markers();
    // One time range for every chart, from the oldest point or policy change kept to the newest, so
    // they line up and every change's marker is drawn.
    const firsts = ["chunks", "itl", "padding"].filter((k) => state[k].length).map((k) => state[k][0][0])
      .concat(ttft.length ? [ttft[0][0]] : [], changed.filter((t) => t >= since));
    const xaxis = firsts.length ? { type: "date", range: [time(Math.max(since, Math.min(...firsts))), time(newest)] } : lastMinutes();
    const relayout = (id, traces) => {
      const empty = traces.every((t) => t.x.length === 0);
      const notes = empty ? m.annotations.concat([emptyNote(id)]) : m.annotations;
      const layout = Object.assign({}, bases[id], { xaxis, shapes: m.shapes, annotations: notes });
      // Each chart in a task of its own: five re-renders in one task blocked the page for ~0.5 s a second.
      setTimeout(() => Plotly.react(id, traces, layout, CONFIG), 0);
    };
    // Each capacity a line at its height through the seconds it ran in: one SVG path per capacity
    // (a marker per chunk cost 0.2-0.3 s to re-render at 10,000 launches/s).
    const byCapacity = new Map();
    for (const [start, c] of state.chunks) {
      let mine = byCapacity.get(c);
      if (!mine) byCapacity.set(c, (mine = { x: [], y: [], last: -Infinity }));
      if (start !== mine.last + 1000 && mine.x.length) { mine.x.push(null); mine.y.push(null); }
      mine.x.push(time(start), time(start + 999)); mine.y.push(c, c);
      mine.last = start;
    }
    relayout("fig-chunks", [...byCapacity.keys()].sort((a, b) => a - b).map((c) => ({
      type: "scatter", mode: "lines", name: String(c), x: byCapacity.get(c).x, y: byCapacity.get(c).y,
      line: { width: 6, color: colour(c) }, hovertemplate: `graph ${c}<br>%{x}<extra></extra>` })));
    relayout("fig-ttft", [{ type: "scatter", mode: "markers", name: "TTFT", x: ttft.map((p) => time(p[0])),
      y: ttft.map((p) => p[1]), text: ttft.map((p) => p[2]), marker: { size: 4 },
      hovertemplate: "%{y:.2f} ms: %{text}<br>%{x}<extra></extra>" }]);
    relayout("fig-itl", [
      { type: "scatter", mode: "lines", name: "p50", x: state.itl.map((p) => time(p[0])), y: state.itl.map((p) => p[1]) },
      { type: "scatter", mode: "lines", name: "p99", x: state.itl.map((p) => time(p[0])), y: state.itl.map((p) => p[2]) },
    ]);
    relayout("fig-rate", [{ type: "bar", name: "launches/s", x: rate.map((s) => time(s * 1000)),
      y: rate.map((s) => state.perSecond.get(s)) }]);
    relayout("fig-padding", [{ type: "scatter", mode: "lines", name: "padding", x: state.padding.map((p) => time(p[0])),
      y: state.padding.map((p) => p[1]) }]);
  }

  function take(frames) {
    for (const f of frames) {
      if (f.seq <= state.lastSeq) continue;
      if (state.lastSeq && f.seq !== state.lastSeq + 1) state.gaps += f.seq - state.lastSeq - 1;
      state.lastSeq = f.seq;
      state.count += 1;
      if (f.chunks === undefined) continue;  // a frame stored before frames were drawn: numbered, nothing to plot
      for (const [t, c] of f.chunks) {
        const start = Math.floor(t / 1000) * 1000;
        if (state.chunkSeen.has(start + ":" + c)) continue;
        state.chunkSeen.add(start + ":" + c);
        state.chunks.push([start, c]);
      }
      for (const [t, ms] of f.ttft) addTtft(t, ms);
      if (f.itl_p50 !== null && f.itl_p50 !== undefined) state.itl.push([f.t1, f.itl_p50, f.itl_p99]);
      if (f.padding_share !== null && f.padding_share !== undefined) state.padding.push([f.t1, f.padding_share]);
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
    document.getElementById("panel-traffic").hidden = !panel.change;  // before and after: different traffic
    if (!panel.change) { body.textContent = "The policy has not changed since the recipe was created."; return; }
    const rows = [
      ["TTFT p50 (ms)", "ttft_p50_ms", 2, "requests"], ["TTFT p99 (ms)", "ttft_p99_ms", 2, "requests"],
      ["launches per request", "launches_per_request", 2, "requests"], ["padding share", "padding_share", 3, "launches"],
      ["most sequences for one prompt length", "sequences_per_length_max", undefined, "prompt_lengths"],
    ];
    // Built as nodes, every text through textContent: the label names a person (who changed the
    // policy), and a username is text, never markup.
    const el = (tag, attrs, ...children) => {
      const node = document.createElement(tag);
      Object.entries(attrs).forEach(([k, v]) => node.setAttribute(k, v));
      node.append(...children);
      return node;
    };
    const sideHead = (name, side) => el("th", {}, `${name}: v${side.version} ${side.policy || ""}`);
    const sideCell = (side, key, digits, count) => el("td", {}, `${cell(side, key, digits)} `, el("small", {}, `n=${side[count]}`));
    const note = (side) => side.too_few
      ? [" ", el("em", { class: "too-few" }, `too few samples (${side.requests} requests, fewer than ${panel.min_samples})`)] : [];
    const table = el("table", { id: "panel-table" },
      el("thead", {}, el("tr", {}, el("th", {}, "measure"), sideHead("before", panel.before), sideHead("after", panel.after))),
      el("tbody", {}, ...rows.map(([label, key, digits, count]) =>
        el("tr", {}, el("td", {}, label), sideCell(panel.before, key, digits, count), sideCell(panel.after, key, digits, count)))));
    body.replaceChildren(
      el("p", { id: "panel-label" }, panel.label),
      el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": "before and after" }, table),
      el("p", {}, ...note(panel.before), ...note(panel.after)));
  }

  // The header's engine: the one the server says runs now, not the one that ran when the page loaded.
  function showEngine(engine) {
    const span = document.getElementById("live-engine");
    const job = engine ? String(engine.job) : "";
    if (span.dataset.engineJob === job) return;
    span.dataset.engineJob = job;
    const link = document.createElement("a");
    if (engine) {
      link.href = engine.url;
      link.textContent = `job ${engine.job}`;
      span.replaceChildren("simulated engine: ", link);
    } else {
      link.href = span.dataset.recipeUrl;
      link.textContent = "recipe page";
      span.replaceChildren("no simulated engine runs (start one on the ", link, ")");
    }
  }

  function refreshPanel() {
    state.panelAt = Date.now();
    fetch(root.dataset.panelUrl, { credentials: "same-origin" }).then((r) => r.json())
      .then((panel) => { showEngine(panel.engine); showPanel(panel); }).catch(console.error);
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
  setInterval(redraw, 1000);  // once a second: the window is minutes wide, and each chart's re-render is ~0.1 s
  setInterval(refreshPanel, 10000);
})();
