// A filter that applies itself: a control marked data-autosubmit submits its form when changed
// (the Content-Security-Policy allows no inline handlers).
document.querySelectorAll("[data-autosubmit]").forEach((control) => {
  control.addEventListener("change", () => control.form.submit());
});
