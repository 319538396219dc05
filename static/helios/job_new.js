// Show only the selected kind's parameters (the hidden ones are disabled, so they are not posted).
// A catalog's "repaired version" box applies to a picked stored boot: it is usable only with one.
(function () {
  "use strict";
  const select = document.getElementById("id_kind");
  if (!select) return;
  function syncRepaired(fieldset) {
    fieldset.querySelectorAll("[data-repaired-for]").forEach((box) => {
      const picker = fieldset.querySelector(`[data-boot-picker="${box.dataset.repairedFor}"]`);
      const picked = picker && Array.from(picker.selectedOptions).some((o) => o.value !== "");
      box.disabled = fieldset.disabled || !picked;
      if (!picked) box.checked = false;
    });
  }
  function show() {
    document.querySelectorAll("fieldset[data-kind]").forEach((fs) => {
      const on = fs.dataset.kind === select.value;
      fs.hidden = !on;
      fs.disabled = !on;
      syncRepaired(fs);
    });
  }
  document.querySelectorAll("[data-boot-picker]").forEach((picker) => {
    picker.addEventListener("change", () => syncRepaired(picker.closest("fieldset")));
  });
  select.addEventListener("change", show);
  show();
})();
