/* The 메트릭 tab: draws the figures the server built (JSON in <script type="application/json">)
 * with plotly.js, after the first load and after every htmx swap. plotly.js (4.8 MB) is
 * fetched only when a chart is on the page. No inline script: CSP allows only our files. */
(function () {
  "use strict";
  if (window.vcMetricsCharts) {
    window.vcMetricsCharts.renderAll(document);
    return;
  }
  var nonce = document.currentScript ? document.currentScript.nonce : "";
  var loading = null;

  function loadPlotly(src) {
    if (window.Plotly) return Promise.resolve(window.Plotly);
    if (!loading) {
      loading = new Promise(function (resolve, reject) {
        var script = document.createElement("script");
        script.src = src;
        if (nonce) script.nonce = nonce;
        script.onload = function () { resolve(window.Plotly); };
        script.onerror = function () { loading = null; reject(new Error("plotly.js")); };
        document.head.appendChild(script);
      });
    }
    return loading;
  }

  function renderAll(root) {
    var scope = root && root.querySelectorAll ? root : document;
    var plots = Array.prototype.slice.call(
      scope.querySelectorAll("[data-metrics-figure]:not([data-rendered])"));
    if (!plots.length) return;
    var panel = document.getElementById("metrics-panel");
    if (!panel) return;
    loadPlotly(panel.dataset.plotlySrc).then(function (Plotly) {
      // One chart per frame, in page order: the first is on screen as soon as it is drawn
      // instead of after all of them (issue 13: first chart within a second).
      function draw(index) {
        if (index >= plots.length) return;
        var el = plots[index];
        var source = document.getElementById(el.dataset.metricsFigure);
        if (source && el.isConnected && !el.dataset.rendered) {
          var figure = JSON.parse(source.textContent);
          el.dataset.rendered = "1";
          Plotly.newPlot(el, figure.data, figure.layout, {displaylogo: false, responsive: true, showSendToCloud: false, showEditInChartStudio: false, topojsonURL: "/static/metrics/vendor/topojson/", plotlyServerURL: ""});
        }
        window.requestAnimationFrame(function () { setTimeout(function () { draw(index + 1); }, 0); });
      }
      draw(0);
    });
  }

  function purge(root) {
    if (!window.Plotly || !root || !root.querySelectorAll) return;
    root.querySelectorAll("[data-metrics-figure][data-rendered]").forEach(function (el) {
      window.Plotly.purge(el);
    });
  }

  document.addEventListener("htmx:beforeSwap", function (event) { purge(event.detail.target); });
  document.addEventListener("htmx:afterSettle", function () { renderAll(document); });
  window.vcMetricsCharts = {renderAll: renderAll};
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { renderAll(document); });
  } else {
    renderAll(document);
  }
})();
