// Live status on the dashboard: poll the API for the listed jobs while any is unfinished.
(function () {
  "use strict";
  const table = document.getElementById("jobs");
  if (!table) return;
  const active = () => Array.from(table.querySelectorAll("tr[data-job]"))
    .filter((tr) => ["queued", "running"].includes(tr.dataset.status));
  async function tick() {
    if (active().length === 0) return setTimeout(tick, 5000);
    try {
      const response = await fetch("/api/jobs/?limit=50", { credentials: "same-origin" });
      if (response.ok) {
        for (const job of await response.json()) {
          const tr = table.querySelector('tr[data-job="' + job.id + '"]');
          if (!tr) continue;
          tr.dataset.status = job.status;
          const status = tr.querySelector(".status");
          status.textContent = job.status;
          status.className = "status status-" + job.status;
          tr.querySelector("progress").value = job.progress.percent;
          tr.querySelector(".pct").textContent = job.progress.percent + "%";
        }
      }
    } catch (e) { /* the server restarts: try again */ }
    setTimeout(tick, 2000);
  }
  setTimeout(tick, 2000);
})();

// Active policies, live: a snapshot on every (re)connect, then each decision step as it commits.
(function () {
  "use strict";
  const table = document.getElementById("recipes");
  if (!table) return;
  const state = document.getElementById("recipes-live");
  let retry = 500;

  function show(recipe, policy, version) {
    const tr = table.querySelector('tr[data-recipe="' + CSS.escape(recipe) + '"]');
    if (!tr) return;
    tr.querySelector(".policy").textContent = policy;
    tr.querySelector(".version").textContent = "v" + version;
  }

  // Open decisions: a proposal adds a row, approval updates it, the end of the road removes it.
  function trackOpenDecision(msg) {
    const tbody = document.querySelector("#open-decisions tbody");
    if (!tbody) return;
    let tr = tbody.querySelector('tr[data-decision="' + msg.decision_id + '"]');
    const open = msg.status === "pending" || msg.status === "approved";
    if (!open) {
      if (tr) tr.remove();
    } else if (tr) {
      const cell = tr.querySelector(".status");
      cell.textContent = msg.status;
      cell.className = "status status-" + msg.status;
    } else {
      tr = document.createElement("tr");
      tr.dataset.decision = msg.decision_id;
      const link = document.createElement("a");
      link.href = "/decisions/" + msg.decision_id;
      link.textContent = "#" + msg.decision_id;
      const cells = [link, msg.recipe, msg.policy + " → " + msg.proposed_policy, msg.status, msg.actor, "just now"];
      cells.forEach((value, i) => {
        const td = document.createElement("td");
        if (value instanceof Node) td.appendChild(value); else td.textContent = value;
        if (i === 3) td.className = "status status-" + msg.status;
        tr.appendChild(td);
      });
      tbody.insertBefore(tr, document.getElementById("no-open-decisions"));
    }
    document.getElementById("no-open-decisions").hidden = tbody.querySelectorAll("tr[data-decision]").length > 0;
  }

  function handle(msg) {
    if (msg.type === "snapshot") {
      msg.recipes.forEach((r) => show(r.recipe, r.policy, r.version));
    } else if (msg.type === "decision") {
      show(msg.recipe, msg.policy, msg.version);
      trackOpenDecision(msg);
      const note = document.getElementById("latest-decision");
      note.hidden = false;
      note.textContent = "Decision #" + msg.decision_id + " on " + msg.recipe + ": " + msg.action + " by " + msg.actor +
        " (" + msg.proposed_policy + "); active policy now " + msg.policy + " v" + msg.version + ".";
    }
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + location.host + "/ws/recipes/");
    ws.onopen = () => { state.textContent = "live"; retry = 500; };
    ws.onmessage = (event) => { try { handle(JSON.parse(event.data)); } catch (e) { console.error(e); } };
    ws.onclose = () => {
      state.textContent = "reconnecting…";
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
  }
  connect();
})();
