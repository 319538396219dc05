// Active policies on every page that shows one (dashboard, recipe, decision pages), live over
// /ws/recipes/: a snapshot on every (re)connect, each decision step, and each change of a recipe's
// policy whatever made it (a decision applied, an emergency rollback).
(function () {
  "use strict";
  const watched = document.querySelectorAll("[data-live-policy], #recipes, [data-applied-recipe]");
  if (!watched.length) return;
  const state = document.getElementById("recipes-live");
  const byRecipe = (attr, recipe) => document.querySelectorAll("[" + attr + '="' + CSS.escape(recipe) + '"]');

  function show(recipe, policy, version) {
    const tr = document.querySelector('#recipes tr[data-recipe="' + CSS.escape(recipe) + '"]');
    if (tr) {
      tr.querySelector(".policy").textContent = policy;
      tr.querySelector(".version").textContent = "v" + version;
    }
    byRecipe("data-live-policy", recipe).forEach((el) => { el.textContent = policy; });
    byRecipe("data-live-version", recipe).forEach((el) => { el.textContent = "v" + version; });
  }

  // Every change is announced where the page has room for it (a decision's own step message, which
  // follows its change, then says more); a decision whose applied version an emergency rollback
  // reverted reads "rolled back".
  function announce(msg) {
    const note = document.getElementById("latest-decision");
    if (note) {
      note.hidden = false;
      note.className = msg.emergency ? "banner emergency" : "notice";
      note.setAttribute("role", msg.emergency ? "alert" : "status");
      note.textContent = (msg.emergency ? "Emergency rollback of " : "Policy change on ") + msg.recipe + " by " + msg.actor +
        ": " + msg.from_policy + " v" + msg.from_version + " → " + msg.policy + " v" + msg.version +
        (msg.reason ? " (" + msg.reason + ")" : "") + ".";
    }
    if (!msg.emergency) return;
    byRecipe("data-applied-recipe", msg.recipe).forEach((el) => {
      if (Number(el.dataset.appliedVersion) !== msg.from_version) return;
      el.textContent = "rolled back";
      el.className = "status status-rolled-back";
      el.title = "reverted in v" + msg.version + " by " + msg.actor;
    });
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
    } else if (msg.type === "policy") {
      show(msg.recipe, msg.policy, msg.version);
      announce(msg);
    } else if (msg.type === "decision") {
      show(msg.recipe, msg.policy, msg.version);
      trackOpenDecision(msg);
      const note = document.getElementById("latest-decision");
      if (!note) return;
      note.hidden = false;
      note.textContent = "Decision #" + msg.decision_id + " on " + msg.recipe + ": " + msg.action + " by " + msg.actor +
        " (" + msg.proposed_policy + "); active policy now " + msg.policy + " v" + msg.version + ".";
    }
  }

  window.heliosLive(() => "/ws/recipes/", {
    open: () => { document.documentElement.dataset.policies = "live"; if (state) state.textContent = "live"; },
    message: handle,
    close: (why) => { document.documentElement.dataset.policies = why; if (state) state.textContent = why; },
  });
})();
