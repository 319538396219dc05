// Draws the figures the server declares ([{id, title, figure, seq, growth, refresh_on}]) and grows
// them from live events as each figure's growth rules say. Knows no job kind and no result shape.
(function () {
  "use strict";
  // showSendToCloud: Plotly.js 4 adds a "Share chart" button that posts the figure to a Plotly
  // server; this site is offline and sends figures nowhere.
  const CONFIG = { displaylogo: false, responsive: true, showSendToCloud: false };

  // A narrow screen (a phone) keeps the plot wide: the legend goes below it, margins shrink, and a
  // long title breaks into lines (Plotly never wraps one).
  const NARROW = window.matchMedia("(max-width: 640px)");
  function fitted(layout, width, traces) {
    if (!NARROW.matches) return layout;
    const title = layout.title && layout.title.text;
    const wrapped = title ? wrap(title, Math.max(20, Math.floor(width / 9))) : title;
    const lines = wrapped ? wrapped.split("<br>").length : 1;
    // A legend item is about 40 px of symbol and gap and 6 px a character of its name (at least 130
    // px): a compare overlay's "#1 arrival to first token" takes a row of its own on a phone.
    const named = traces.filter((t) => t.showlegend !== false);
    const item = Math.max(130, 40 + 6 * Math.max(0, ...named.map((t) => String(t.name || "").length)));
    const legendRows = Math.ceil(named.length / Math.max(1, Math.floor(width / item)));
    const margin = layout.margin || {};
    const below = 24 * legendRows;
    return Object.assign({}, layout, {
      title: Object.assign({}, layout.title, { text: wrapped, font: { size: 15 } }),
      margin: Object.assign({}, margin, { l: 50, r: 10, t: (margin.t || 76) + 18 * (lines - 1), b: (margin.b || 50) + below }),
      legend: Object.assign({}, layout.legend, { orientation: "h", x: 0, xanchor: "left", yref: "container", y: 0, yanchor: "bottom" }),
      height: (layout.height || 380) + below + 18 * (lines - 1),
    });
  }
  function wrap(text, perLine) {
    const out = [];
    let line = "";
    for (const word of String(text).split(" ")) {
      if (line && (line + " " + word).length > perLine) { out.push(line); line = word; } else line = line ? line + " " + word : word;
    }
    if (line) out.push(line);
    return out.join("<br>");
  }

  // Each figure is drawn in a task of its own, the first too (not in the task that parsed the page's
  // or the answer's JSON), so the page answers input between them (one long task per page was 1-2 s
  // of blocked main thread on a chart-heavy job page).
  const nextTask = () => new Promise((resolve) => setTimeout(resolve, 0));

  // A figure is drawn when it comes within a quarter screen of the viewport, or IDLE_MS after load
  // (one figure a task): the first screen's charts are drawn first and the page answers input
  // sooner; a chart further down costs the reader nothing until then, and is there by the time
  // anyone scrolls to it. Until then its box keeps the figure's height, so nothing below it moves.
  const IDLE_MS = 5000;
  const waiting = new Map();  // el -> its latest draw
  const near = "IntersectionObserver" in window
    ? new IntersectionObserver((seen) => seen.forEach((e) => { if (e.isIntersecting) setTimeout(() => drawWaiting(e.target), 0); }), { rootMargin: "25% 0px" })
    : null;
  function drawWaiting(el) {
    const drawIt = waiting.get(el);
    if (!drawIt) return;
    waiting.delete(el);
    if (near) near.unobserve(el);
    drawIt();
  }
  function onScreen(el) {
    const box = el.getBoundingClientRect();
    return box.top < window.innerHeight * 1.25 && box.bottom > -window.innerHeight * 0.25;
  }
  function whenNear(el, drawIt) {
    if (!near) { drawIt(); return; }
    if (!waiting.has(el)) near.observe(el);
    waiting.set(el, drawIt);
  }
  function drainWhenIdle() {
    const next = waiting.keys().next();
    if (next.done) return;
    drawWaiting(next.value);
    setTimeout(drainWhenIdle, 0);
  }
  const loaded = document.readyState === "complete" ? Promise.resolve() : new Promise((r) => window.addEventListener("load", r, { once: true }));
  loaded.then(() => setTimeout(drainWhenIdle, IDLE_MS));

  async function draw(container, entries, filePrefix) {
    const drawn = new Map();
    for (const entry of entries) {
      let el = container.querySelector('[data-figure-id="' + CSS.escape(entry.id) + '"]');
      if (!el) {
        el = document.createElement("div");
        el.className = "chart figure";
        el.dataset.figureId = entry.id;
        el.setAttribute("role", "figure");
        container.appendChild(el);
        const summary = document.createElement("p");
        summary.className = "figure-summary";
        summary.id = "summary-" + entry.id;
        container.appendChild(summary);
        el.setAttribute("aria-describedby", summary.id);
      }
      el.setAttribute("aria-label", entry.title);
      const summary = document.getElementById("summary-" + entry.id);
      if (summary) summary.textContent = entry.summary || "";
      const config = Object.assign({}, CONFIG, { toImageButtonOptions: { format: "png", filename: filePrefix + "-" + entry.id } });
      const layout = entry.figure.layout || {};
      const data = entry.figure.data || [];
      const width = el.clientWidth || container.clientWidth;
      el.style.minHeight = (fitted(layout, width, data).height || 450) + "px";
      const drawIt = () => {
        el._helios = { layout: layout, config: config };
        Plotly.react(el, data, fitted(layout, el.clientWidth || container.clientWidth, data), config);
        if (!el.dataset.linked) {
          el.dataset.linked = "1";
          el.on("plotly_click", (click) => follow(click.points[0]));
        }
      };
      drawn.set(entry.id, el);
      // Drawn now: a figure on screen (draw() resolves with the screen drawn), one already drawn,
      // and one that grows live.
      if ((entry.growth || []).length === 0 && !el.data && !onScreen(el)) { whenNear(el, drawIt); continue; }
      waiting.delete(el);
      await nextTask();
      drawIt();
    }
    for (const el of Array.from(container.querySelectorAll("[data-figure-id]"))) {
      if (!drawn.has(el.dataset.figureId)) {
        const summary = document.getElementById("summary-" + el.dataset.figureId);
        if (summary) summary.remove();
        waiting.delete(el);
        if (near) near.unobserve(el);
        el.remove();
      }
    }
    return drawn;
  }
  // Crossing the phone width relays every drawn figure out for the new width (points kept as drawn).
  NARROW.addEventListener("change", () => {
    for (const el of document.querySelectorAll("[data-figure-id]")) {
      if (el._helios && el.data) Plotly.react(el, el.data, fitted(el._helios.layout, el.clientWidth, el.data), el._helios.config);
    }
  });

  // A trace may link its points somewhere (trace.meta.link with {x} for the point's x).
  function follow(point) {
    const link = point && point.data && point.data.meta && point.data.meta.link;
    if (typeof link === "string" && link.startsWith("/")) {
      window.location.assign(link.replace("{x}", encodeURIComponent(point.x)));
    }
  }

  // Live growth: events -> points appended to traces. Points wait in a batch and are drawn in an
  // animation frame (one Plotly.extendTraces, one figure a frame), each trace keeping at most its
  // rule's max_points. Plotly redraws a whole figure on each extend, so frames are spaced by at
  // least MIN_GAP_MS and by four times what the last one cost: the page stays responsive at any
  // event rate, drawing less often as the figures grow.
  const MIN_GAP_MS = 100;
  const RECENT = 5000;
  function Grower() {
    this.rules = [];          // [{el, rule}]
    this.seq = 0;             // the figures include events up to this number
    this.recent = [];         // growth events kept to re-apply after a redraw
    this.batch = new Map();   // el -> {traces: Map(trace -> {x: [], y: [], max}), span, newest}
    this.frame = 0;           // a requested animation frame
    this.timer = null;        // waiting for the gap before the next frame
    this.notBefore = 0;       // performance.now() before which no frame is drawn
  }
  Grower.prototype.reset = function (drawn, entries) {
    this.rules = [];
    this.seq = entries.length ? Math.min(...entries.map((e) => e.seq || 0)) : 0;
    for (const entry of entries) {
      for (const rule of entry.growth || []) this.rules.push({ el: drawn.get(entry.id), rule: rule });
    }
    this.batch.clear();
    const replay = this.recent.filter((ev) => ev.seq > this.seq);
    this.recent = [];
    replay.forEach((ev) => this.add(ev));
  };
  Grower.prototype.wants = function (ev) { return this.rules.some((r) => r.rule.event === ev.type); };
  Grower.prototype.add = function (ev) {
    if (typeof ev.seq === "number" && ev.seq <= this.seq) return;
    let used = false;
    for (const { el, rule } of this.rules) {
      if (rule.event !== ev.type || !el || !el.data) continue;
      // A rule's points: the rows of event[points] ([x, y] or [x, y, trace name]), or one (event[x], event[y]).
      const rows = rule.points ? ev[rule.points] : [[ev[rule.x], ev[rule.y]]];
      if (!Array.isArray(rows)) continue;
      for (const [x, y, name] of rows) {
        if (x === undefined || x === null || y === undefined || (y === null && !rule.points)) continue;
        const trace = name !== undefined ? traceNamed(el, rule, String(name)) : rule.trace_field ? ev[rule.trace_field] : rule.trace;
        if (typeof trace !== "number" || trace < 0 || trace >= el.data.length) continue;
        used = this.put(el, rule, trace, x, y) || used;
      }
    }
    if (!used) return;
    this.recent.push(ev);
    if (this.recent.length > 2 * RECENT) this.recent = this.recent.slice(-RECENT);
    this.schedule();
  };
  // The trace named `name`, added from the rule's `traces` when the figure has none yet (-1: none).
  function traceNamed(el, rule, name) {
    const i = el.data.findIndex((t) => t.name === name);
    const template = i < 0 && rule.traces ? rule.traces[name] || rule.traces[""] : null;
    if (!template) return i;
    Plotly.addTraces(el, Object.assign({}, template, { name: name, x: [], y: [] }));
    return el.data.length - 1;
  }
  Grower.prototype.put = function (el, rule, trace, x, y) {
    if (!this.batch.has(el)) this.batch.set(el, { traces: new Map(), span: null, newest: -Infinity });
    const pending = this.batch.get(el);
    if (!pending.traces.has(trace)) pending.traces.set(trace, { x: [], y: [], max: rule.max_points });
    const points = pending.traces.get(trace);
    // same_x: the point at the trace's last x, waiting here or drawn, takes the sum, or the point is dropped.
    const drawn = el.data[trace];
    const onScreen = !points.x.length && drawn.x && drawn.x.length;
    const last = points.x.length ? points.x[points.x.length - 1] : onScreen ? drawn.x[drawn.x.length - 1] : undefined;
    if (rule.same_x === "drop" && last !== undefined && x <= last) return false;
    if (rule.same_x === "sum" && last === x) {
      if (onScreen) { drawn.y[drawn.y.length - 1] += y; points.touched = true; } else points.y[points.y.length - 1] += y;
      return true;
    }
    points.x.push(x);
    points.y.push(y);
    if (points.x.length > 2 * points.max) {  // a hidden tab draws no frames: keep the batch bounded
      points.x.splice(0, points.x.length - points.max);
      points.y.splice(0, points.y.length - points.max);
    }
    if (rule.x_span) { pending.span = rule.x_span; pending.newest = Math.max(pending.newest, x); }
    return true;
  };
  Grower.prototype.schedule = function () {
    if (this.frame || this.timer) return;
    const wait = this.notBefore - performance.now();
    if (wait > 0) {
      this.timer = setTimeout(() => { this.timer = null; this.schedule(); }, wait);
    } else {
      this.frame = requestAnimationFrame(() => { this.frame = 0; this.flush(); });
    }
  };
  // One figure a frame (its extend is a task of its own: three charts extended in one task blocked
  // the live page over 200 ms on a loaded machine); the others wait their turn, in arrival order.
  Grower.prototype.flush = function () {
    const started = performance.now();
    const [el, pending] = this.batch.entries().next().value || [];
    if (!el) return;
    this.batch.delete(el);
    // Extending redraws from el.layout: the window moves to the newest point and the "empty" note goes.
    const layout = el.layout;
    if (layout.annotations) layout.annotations = layout.annotations.filter((a) => a.name !== "empty");
    if (pending.span) {  // up to the newest point, or the declared range's end (a policy change's marker) if later
      const declared = ((el._helios.layout.xaxis || {}).range || [])[1];
      el._heliosNewest = Math.max(el._heliosNewest || -Infinity, pending.newest, typeof declared === "number" ? declared : -Infinity);
      layout.xaxis = Object.assign({}, layout.xaxis, { range: [el._heliosNewest - pending.span, el._heliosNewest], autorange: false });
    }
    const traces = Array.from(pending.traces.keys()).filter((t) => pending.traces.get(t).x.length);
    if (!traces.length) Plotly.redraw(el);  // only sums at points already drawn
    else {
      const update = { x: traces.map((t) => pending.traces.get(t).x), y: traces.map((t) => pending.traces.get(t).y) };
      Plotly.extendTraces(el, update, traces, Math.max(...traces.map((t) => pending.traces.get(t).max)));
    }
    const now = performance.now();
    this.notBefore = now + Math.max(MIN_GAP_MS, 4 * (now - started));
    if (this.batch.size) this.schedule();
  };

  // A page's figures, drawn into `container` from `first` (the answer the page came with) or `url`,
  // and grown: take(ev) grows them from a live event, or asks `url` again (at most once a second)
  // after an event type the answer lists in refresh_on. One fetch at a time; a call while one is
  // under way fetches once more after it (the last drawing must be the newest).
  function Live(container, url, filePrefix) {
    this.container = container; this.url = url; this.filePrefix = filePrefix;
    this.grower = new Grower();
    this.refreshOn = new Set();
    this.loading = null; this.again = false; this.timer = null;
  }
  Live.prototype.show = async function (entries) {
    const drawn = await draw(this.container, entries, this.filePrefix);
    this.grower.reset(drawn, entries);
    this.refreshOn = new Set(entries.flatMap((e) => e.refresh_on || []));
    this.container.dataset.loaded = String(Number(this.container.dataset.loaded || 0) + 1);
  };
  Live.prototype.load = async function () {
    if (this.loading) { this.again = true; return this.loading; }
    this.loading = (async () => {
      do {
        this.again = false;
        const response = await fetch(this.url, { credentials: "same-origin" });
        if (!response.ok) { console.warn("figures:", response.status); return; }
        await this.show(await response.json());
      } while (this.again);
    })();
    try { await this.loading; } finally { this.loading = null; }
  };
  Live.prototype.take = function (ev) {
    if (this.grower.wants(ev)) this.grower.add(ev);
    else if (this.refreshOn.has(ev.type) && !(ev.seq <= this.grower.seq) && !this.timer) {
      this.timer = setTimeout(() => { this.timer = null; this.load(); }, 1000);
    }
  };

  window.HeliosFigures = { draw: draw, Grower: Grower, Live: Live };

  // Pages that embed their figures (explain, compare) draw them on load.
  for (const el of document.querySelectorAll("[data-figures]")) {
    draw(el, JSON.parse(el.dataset.figures), el.dataset.filePrefix || "helios");
  }
})();
