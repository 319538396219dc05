// Job lists, live (dashboard, recipe page, /jobs/): a snapshot on every (re)connect, then each
// change of status or progress as it lands; new jobs appear at the top.
(function () {
  "use strict";
  const table = document.getElementById("jobs");
  if (!table) return;
  const tbody = table.querySelector("tbody");
  const onlyRecipe = table.dataset.recipe || "";
  const compare = table.dataset.compare === "true";
  const FINISHED = ["done", "failed", "cancelled"];

  function cell(tr, content) {
    const td = document.createElement("td");
    if (content instanceof Node) td.appendChild(content); else td.textContent = content;
    tr.appendChild(td);
    return td;
  }

  function newRow(job) {
    const tr = document.createElement("tr");
    tr.dataset.job = job.id;
    if (compare) cell(tr, "");
    const link = document.createElement("a");
    link.href = "/jobs/" + job.id;
    link.textContent = "#" + job.id;
    cell(tr, link);
    cell(tr, job.kind);
    cell(tr, job.recipe || "—");
    cell(tr, "").className = "status";
    const progress = document.createElement("span");
    progress.innerHTML = '<progress max="100" value="0"></progress> <span class="pct">0%</span>';
    cell(tr, progress);
    cell(tr, job.created_by || "—");
    cell(tr, job.created_at.replace("T", " ").slice(0, 19));
    const empty = tbody.querySelector("tr.empty");
    if (empty) empty.remove();
    tbody.insertBefore(tr, tbody.firstChild);
    return tr;
  }

  function update(job) {
    if (onlyRecipe && job.recipe !== onlyRecipe) return;
    const tr = tbody.querySelector('tr[data-job="' + job.id + '"]') || newRow(job);
    tr.dataset.status = job.status;
    const status = tr.querySelector(".status");
    status.textContent = job.status;
    status.className = "status status-" + job.status;
    tr.querySelector("progress").value = job.progress.percent;
    tr.querySelector(".pct").textContent = job.progress.percent + "%";
    if (compare && FINISHED.includes(job.status) && !tr.querySelector("input")) {
      const box = document.createElement("input");
      box.type = "checkbox"; box.name = "ids"; box.value = job.id;
      box.setAttribute("aria-label", "compare job " + job.id);
      tr.firstElementChild.appendChild(box);
    }
  }

  window.heliosLive(() => "/ws/jobs/", {
    open: () => { table.dataset.live = "true"; },
    message: (msg) => {
      if (msg.type === "snapshot") msg.jobs.slice().reverse().forEach(update);  // oldest first: newest ends on top
      else if (msg.type === "job") update(msg.job);
    },
    close: () => { table.dataset.live = "false"; },
  });
})();

// Active policies, live: a snapshot on every (re)connect, then each decision step as it commits.
(function () {
  "use strict";
  const table = document.getElementById("recipes");
  if (!table) return;
  const state = document.getElementById("recipes-live");

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

  window.heliosLive(() => "/ws/recipes/", {
    open: () => { state.textContent = "live"; },
    message: handle,
    close: (why) => { state.textContent = why; },
  });
})();
