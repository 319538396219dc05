// The live recipe page: numbered frames over /ws/recipes/<name>/live/ grow the charts the server
// declares, the latest change's before/after panel and the simulated engine that runs (both re-read
// as telemetry comes, and every 10 s). After a reconnect the server refills from the last frame
// number this page saw, so the numbers never have a hole (data-gaps counts any that would).
(function () {
  "use strict";
  const root = document.getElementById("live");
  if (!root) return;
  // The charts are the server's (heliosweb/figures/live.py), drawn and grown by figures.js from the frames.
  const figures = new HeliosFigures.Live(document.getElementById("live-figures"), root.dataset.figuresUrl, "live-" + root.dataset.recipe);
  const state = { lastSeq: 0, gaps: 0, count: 0, panelAt: 0 };

  function take(frames) {
    for (const f of frames) {
      if (f.seq <= state.lastSeq) continue;
      if (state.lastSeq && f.seq !== state.lastSeq + 1) state.gaps += f.seq - state.lastSeq - 1;
      state.lastSeq = f.seq;
      state.count += 1;
      figures.take(f);
    }
    root.dataset.lastSeq = String(state.lastSeq);
    root.dataset.frames = String(state.count);
    root.dataset.gaps = String(state.gaps);
    document.getElementById("frame-count").textContent = String(state.count);
    document.getElementById("last-seq").textContent = String(state.lastSeq);
    document.getElementById("no-telemetry").hidden = state.count > 0;
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

  const connect = () => window.heliosLive(() => root.dataset.wsPath + "?after=" + state.lastSeq, {
    open: () => { document.getElementById("connection").textContent = "live"; },
    close: (why) => { document.getElementById("connection").textContent = why; },
    message: (msg) => {
      if (msg.type === "frames") take(msg.frames);
      else if (msg.type === "policies") {
        document.getElementById("live-policy").textContent = `${msg.current.policy} v${msg.current.version}`;
        figures.take(msg);  // the markers: the figures are asked for again
        refreshPanel();
      }
    },
  });
  // Connected once the charts are drawn: the first frames grow them.
  figures.show(JSON.parse(document.getElementById("live-figures").dataset.first)).then(connect);
  setInterval(refreshPanel, 10000);
})();
