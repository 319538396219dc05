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
