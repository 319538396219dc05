// Draws the figures the server declares ([{id, title, figure, seq, growth, refresh_on}]) and grows
// them from live events as each figure's growth rules say. Knows no job kind and no result shape.
(function () {
  "use strict";
  // showSendToCloud: Plotly.js 4 adds a "Share chart" button that posts the figure to a Plotly
  // server; this site is offline and sends figures nowhere.
  const CONFIG = { displaylogo: false, responsive: true, showSendToCloud: false };

  function draw(container, entries, filePrefix) {
    const drawn = new Map();
    for (const entry of entries) {
      let el = container.querySelector('[data-figure-id="' + CSS.escape(entry.id) + '"]');
      if (!el) {
        el = document.createElement("div");
        el.className = "chart figure";
        el.dataset.figureId = entry.id;
        container.appendChild(el);
      }
      const config = Object.assign({}, CONFIG, { toImageButtonOptions: { format: "png", filename: filePrefix + "-" + entry.id } });
      Plotly.react(el, entry.figure.data || [], entry.figure.layout || {}, config);
      if (!el.dataset.linked) {
        el.dataset.linked = "1";
        el.on("plotly_click", (click) => follow(click.points[0]));
      }
      drawn.set(entry.id, el);
    }
    for (const el of Array.from(container.querySelectorAll("[data-figure-id]"))) {
      if (!drawn.has(el.dataset.figureId)) el.remove();
    }
    return drawn;
  }

  // A trace may link its points somewhere (trace.meta.link with {x} for the point's x).
  function follow(point) {
    const link = point && point.data && point.data.meta && point.data.meta.link;
    if (typeof link === "string" && link.startsWith("/")) {
      window.location.assign(link.replace("{x}", encodeURIComponent(point.x)));
    }
  }

  // Live growth: events -> points appended to traces. Points wait in a batch and are drawn in an
  // animation frame (one Plotly.extendTraces per figure per frame), each trace keeping at most its
  // rule's max_points. Plotly redraws a whole figure on each extend, so frames are spaced by at
  // least MIN_GAP_MS and by four times what the last one cost: the page stays responsive at any
  // event rate, drawing less often as the figures grow.
  const MIN_GAP_MS = 100;
  const RECENT = 5000;
  function Grower() {
    this.rules = [];          // [{el, rule}]
    this.seq = 0;             // the figures include events up to this number
    this.recent = [];         // growth events kept to re-apply after a redraw
    this.batch = new Map();   // el -> Map(trace -> {x: [], y: [], max})
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
      const x = ev[rule.x], y = ev[rule.y];
      const trace = rule.trace_field ? ev[rule.trace_field] : rule.trace;
      if (x === undefined || y === undefined || typeof trace !== "number" || trace >= el.data.length) continue;
      if (!this.batch.has(el)) this.batch.set(el, new Map());
      const byTrace = this.batch.get(el);
      if (!byTrace.has(trace)) byTrace.set(trace, { x: [], y: [], max: rule.max_points });
      const points = byTrace.get(trace);
      points.x.push(x);
      points.y.push(y);
      if (points.x.length > 2 * points.max) {  // a hidden tab draws no frames: keep the batch bounded
        points.x.splice(0, points.x.length - points.max);
        points.y.splice(0, points.y.length - points.max);
      }
      used = true;
    }
    if (!used) return;
    this.recent.push(ev);
    if (this.recent.length > 2 * RECENT) this.recent = this.recent.slice(-RECENT);
    this.schedule();
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
  Grower.prototype.flush = function () {
    const started = performance.now();
    for (const [el, byTrace] of this.batch) {
      const traces = Array.from(byTrace.keys());
      const update = { x: traces.map((t) => byTrace.get(t).x), y: traces.map((t) => byTrace.get(t).y) };
      const max = Math.max(...traces.map((t) => byTrace.get(t).max));
      Plotly.extendTraces(el, update, traces, max);
    }
    this.batch.clear();
    const now = performance.now();
    this.notBefore = now + Math.max(MIN_GAP_MS, 4 * (now - started));
  };

  window.HeliosFigures = { draw: draw, Grower: Grower };

  // Pages that embed their figures (explain, compare) draw them on load.
  for (const el of document.querySelectorAll("[data-figures]")) {
    draw(el, JSON.parse(el.dataset.figures), el.dataset.filePrefix || "helios");
  }
})();
