/* The 메트릭 tab: draws the figures the server built (JSON in <script type="application/json">)
 * with plotly.js, after the first load and after every htmx swap. plotly.js (1.0 MB) is
 * fetched from the moment the tab opens: the tab's frame loads this file before the charts
 * are asked for (templates/clusters/detail.html), so the script's download and compile
 * overlap the charts' request; on the cluster's other tabs, once the page is idle. No inline
 * script: CSP allows only our files.
 *
 * The view survives a refresh (the 30-second poll, a range change, cluster-changed swap the
 * panel's body): the heatmap's metric (사용률/온도/전력) is the one last chosen, and the
 * page does not jump, because what is swapped in keeps the heights of what it replaces until
 * it is drawn. */
(function () {
  "use strict";
  // Run again with each tab frame htmx swaps in (the page's first run may have been on
  // another tab): plotly.js from now, and what is here drawn.
  if (window.vcMetricsCharts) {
    window.vcMetricsCharts.opened();
    return;
  }
  var nonce = document.currentScript ? document.currentScript.nonce : "";
  var loading = null;
  var CONFIG = {displaylogo: false, responsive: true, showSendToCloud: false, showEditInChartStudio: false, topojsonURL: "/static/metrics/vendor/topojson/", plotlyServerURL: ""};

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

  // The heatmap's metric, by its button's index: kept on the element that outlives the
  // panel's swaps (the tab's frame), so a refresh or a range change draws the same metric.
  function keeper() {
    return document.getElementById("metrics-charts") || document.getElementById("metrics-panel");
  }

  function withChosenMetric(figure) {
    var menus = figure.layout && figure.layout.updatemenus;
    var holder = keeper();
    var chosen = holder ? parseInt(holder.dataset.heatmapMetric || "", 10) : NaN;
    if (!menus || !menus.length || isNaN(chosen) || chosen < 0 || chosen >= figure.data.length) {
      return figure;
    }
    menus[0].active = chosen;
    figure.data.forEach(function (trace, index) { trace.visible = index === chosen; });
    return figure;
  }

  function rememberMetric(el) {
    el.on("plotly_buttonclicked", function (event) {
      var holder = keeper();
      if (holder) holder.dataset.heatmapMetric = String(event.active);
    });
  }

  function boxesMeet(a, b) {
    return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  }

  // plotly's toolbar (the modebar, shown on hover or a tap) sits at the plot's top right,
  // the heatmap's toggles at its top left: on a narrow plot they met and the toolbar, drawn
  // above, took the taps meant for 온도 and 전력. Then the toggles get a row of their own
  // under the toolbar.
  function apartFromToolbar(Plotly, el) {
    var bar = el.querySelector(".modebar");
    var toggles = el.querySelector(".updatemenu-container");
    if (!bar || !toggles) return null;
    var barBox = bar.getBoundingClientRect();
    if (!boxesMeet(barBox, toggles.getBoundingClientRect())) return null;
    var layout = el.layout;
    var row = Math.ceil(barBox.height) + 4;
    return Plotly.relayout(el, {"margin.t": layout.margin.t + row, height: layout.height + row});
  }

  // data-drawn on the body once all of it is drawn, the device panel included: the state
  // a reader (and a browser test) can wait for instead of a delay.
  function settled(body) {
    if (!body || body.querySelector("[data-metrics-figure]:not([data-rendered])")) return;
    if (body.querySelector("#metrics-devices[aria-busy]")) return;
    body.dataset.drawn = "1";
  }

  function renderAll(root) {
    var scope = root && root.querySelectorAll ? root : document;
    var plots = Array.prototype.slice.call(
      scope.querySelectorAll("[data-metrics-figure]:not([data-rendered])"));
    var panel = document.getElementById("metrics-panel");
    if (!panel) return;
    if (!plots.length) {
      settled(document.getElementById("metrics-body"));
      return;
    }
    loadPlotly(panel.dataset.plotlySrc).then(function (Plotly) {
      // One chart per frame, in page order: the first is on screen as soon as it is drawn
      // instead of after all of them (issue 13: first chart within a second).
      function draw(index) {
        if (index >= plots.length) {
          settled(document.getElementById("metrics-body"));
          return;
        }
        var el = plots[index];
        var source = document.getElementById(el.dataset.metricsFigure);
        var drawn = null;
        if (source && el.isConnected && !el.dataset.rendered) {
          var figure = withChosenMetric(JSON.parse(source.textContent));
          el.dataset.rendered = "1";
          drawn = Plotly.newPlot(el, figure.data, figure.layout, CONFIG).then(function () {
            if (!figure.layout.updatemenus) return null;
            rememberMetric(el);
            return apartFromToolbar(Plotly, el);
          }).then(function () { el.style.minHeight = ""; });
        }
        Promise.resolve(drawn).then(function () {
          window.requestAnimationFrame(function () { setTimeout(function () { draw(index + 1); }, 0); });
        });
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

  // Heights of what a swap replaces, by what stands for the same thing in what comes in
  // (a chart's figure id, the device panel): the new content keeps them until it is drawn,
  // so the page neither shrinks under the reader (the browser would clamp the scroll) nor
  // moves what they were looking at. The heatmap comes a request later than the body: its
  // height waits in ``heights`` for it.
  var heights = {};
  var scroll = null;

  function measure(target) {
    target.querySelectorAll("[data-metrics-figure]").forEach(function (el) {
      heights["[data-metrics-figure='" + el.dataset.metricsFigure + "']"] = el.offsetHeight;
    });
    var devices = target.querySelector("#metrics-devices");
    if (devices) heights["#metrics-devices"] = devices.offsetHeight;
  }

  function hold(root) {
    Object.keys(heights).forEach(function (selector) {
      var el = root.querySelector(selector);
      var height = heights[selector];
      if (!el || !height) return;
      if (selector === "#metrics-devices" && el.firstElementChild) {
        // The device panel's placeholder holds the height by its line: htmx settles an
        // element with an id back to the style the server wrote.
        height -= el.offsetHeight - el.firstElementChild.offsetHeight;
        el = el.firstElementChild;
      }
      el.style.minHeight = height + "px";
    });
    if (window.scrollY !== scroll.y || window.scrollX !== scroll.x) window.scrollTo(scroll.x, scroll.y);
  }

  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    var ours = target && (target.id === "metrics-body" || target.id === "metrics-devices");
    scroll = ours ? {x: window.scrollX, y: window.scrollY} : null;
    if (ours && target.id === "metrics-body") {
      heights = {};
      measure(target);
    }
    purge(target);
  });
  document.addEventListener("htmx:afterSwap", function (event) {
    if (!scroll) return;
    var id = event.detail.target && event.detail.target.id;
    var root = document.getElementById(id === "metrics-devices" ? "metrics-devices" : "metrics-body");
    if (root) hold(root);
    scroll = null;
  });
  document.addEventListener("htmx:afterSettle", function () { renderAll(document); });
  // On the cluster's other tabs (this file is loaded by every tab of the cluster's page),
  // plotly.js is fetched and run once the page is idle, so that a later click on 메트릭
  // finds it ready: run for the first time, plotly.js takes most of the tab's first second
  // (bench_first_chart). Not when the reader asked to save data.
  function loadWhenIdle(src) {
    if (navigator.connection && navigator.connection.saveData) return;
    function start() { loadPlotly(src).catch(function () {}); }
    function idle() {
      if (window.requestIdleCallback) window.requestIdleCallback(start, {timeout: 5000});
      else setTimeout(start, 1000);
    }
    if (document.readyState === "complete") idle();
    else window.addEventListener("load", idle, {once: true});
  }

  // Opened as a tab, the frame names plotly.js before the charts are asked for: start now.
  function loadForFrame() {
    var frame = document.getElementById("metrics-charts");
    if (!frame || !frame.dataset.plotlySrc) return false;
    loadPlotly(frame.dataset.plotlySrc).catch(function () {});
    return true;
  }

  window.vcMetricsCharts = {
    opened: function () {
      loadForFrame();
      renderAll(document);
    },
  };
  var tab = document.getElementById("tab-metrics");
  if (!loadForFrame() && tab && tab.dataset.plotlySrc) loadWhenIdle(tab.dataset.plotlySrc);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { renderAll(document); });
  } else {
    renderAll(document);
  }
})();
