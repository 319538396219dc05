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
