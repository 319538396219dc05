(function () {
  "use strict";
  const el = document.getElementById("compare-chart");
  if (el && window.Plotly) {
    const fig = JSON.parse(el.dataset.figure);
    Plotly.newPlot(el, fig.data, fig.layout, { displaylogo: false });
  }
})();
