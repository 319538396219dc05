// Show only the selected kind's parameters (the hidden ones are disabled, so they are not posted).
(function () {
  "use strict";
  const select = document.getElementById("id_kind");
  if (!select) return;
  function show() {
    document.querySelectorAll("fieldset[data-kind]").forEach((fs) => {
      const on = fs.dataset.kind === select.value;
      fs.hidden = !on;
      fs.disabled = !on;
    });
  }
  select.addEventListener("change", show);
  show();
})();
