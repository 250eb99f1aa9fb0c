// Small behaviours for the console; loaded with the CSP nonce, no inline handlers anywhere.
(function () {
  "use strict";

  // Project switcher: submit on change (a button is there for no-JS users).
  document.addEventListener("change", function (event) {
    var el = event.target;
    if (el.matches && el.matches("select[data-autosubmit]")) el.form.submit();
    if (el.matches && el.matches("select[name=action]")) toggleClusterChooser(el.form);
  });

  function toggleClusterChooser(form) {
    if (!form) return;
    var action = form.querySelector("select[name=action]");
    var chooser = form.querySelector("[data-show-when=attach]");
    // The cluster to join is asked for once 클러스터에 연결 is the chosen action.
    if (action && chooser) chooser.hidden = action.value !== "attach";
  }

  // Copy buttons for the torchrun / NCCL snippets.
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button[data-copy]");
    if (button) {
      var source = document.querySelector(button.getAttribute("data-copy"));
      if (source && navigator.clipboard) {
        navigator.clipboard.writeText(source.textContent).then(function () {
          button.classList.add("copied");
          setTimeout(function () { button.classList.remove("copied"); }, 1500);
        });
      }
      return;
    }
    var close = event.target.closest && event.target.closest("[data-close-panel]");
    if (close && close.closest("#create-panel")) {
      event.preventDefault();
      closeCreatePanel(close.closest("#create-panel"));
    }
  });

  // -- The create panel: its first field gets the focus, Esc closes it -------------------

  var panelOpener = null;
  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail.elt;
    if (elt && elt.getAttribute && elt.getAttribute("hx-target") === "#create-panel") panelOpener = elt;
  });

  function firstField(root) {
    return root.querySelector(
      ".has-error input:not([type=hidden]), .has-error select, " +
      "input:not([type=hidden]):not([disabled]), select:not([disabled]), textarea"
    );
  }

  function closeCreatePanel(panel) {
    panel.innerHTML = "";
    if (panelOpener && document.body.contains(panelOpener)) panelOpener.focus();
  }

  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    var panel = document.getElementById("create-panel");
    if (panel && panel.firstElementChild && panel.contains(document.activeElement)) {
      event.preventDefault();
      closeCreatePanel(panel);
    }
  });

  // -- 이름 변경: opening it moves the focus into the field, Esc cancels it -----------------
  // As the dialogs do: the name is selected to be typed over; Esc (in the field or on the
  // open button) closes it, puts the name back as it was and returns the focus to 이름 변경.

  document.addEventListener("toggle", function (event) {
    var details = event.target;
    if (!details.matches || !details.matches("details.rename") || !details.open) return;
    var field = details.querySelector("input[type=text]");
    if (field) { field.focus(); field.select(); }
  }, true);

  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    var details = event.target.closest && event.target.closest("details.rename[open]");
    if (!details) return;
    event.preventDefault();
    var field = details.querySelector("input[type=text]");
    if (field) field.value = field.defaultValue;
    details.open = false;
    var summary = details.querySelector("summary");
    if (summary) summary.focus();
  });

  // -- Tabs: arrow keys move along the tablist (ARIA tabs pattern, manual activation) -----
  // Loading a tab is a request, so the arrows only move the focus; Enter or Space opens it.

  document.addEventListener("keydown", function (event) {
    var tab = event.target.closest && event.target.closest("[role=tab]");
    if (!tab) return;
    var tabs = Array.prototype.slice.call(tab.closest("[role=tablist]").querySelectorAll("[role=tab]"));
    var index = tabs.indexOf(tab);
    var next = null;
    if (event.key === "ArrowRight") next = tabs[(index + 1) % tabs.length];
    else if (event.key === "ArrowLeft") next = tabs[(index - 1 + tabs.length) % tabs.length];
    else if (event.key === "Home") next = tabs[0];
    else if (event.key === "End") next = tabs[tabs.length - 1];
    else if (event.key === " ") { event.preventDefault(); tab.click(); return; }
    if (!next) return;
    event.preventDefault();
    tabs.forEach(function (t) { t.setAttribute("tabindex", t === next ? "0" : "-1"); });
    next.focus();
  });

  // -- Tabs: the last click wins, and nothing is aborted -----------------------------------
  // A tab's request and the panel's own refresh (on cluster-changed) both replace
  // #tab-panel. Aborting the older request (hx-sync replace) made htmx log an error for what
  // the user chose to do; instead each request for the panel is numbered as it is sent, and
  // an answer is not swapped in when a tab was opened after it was sent, nor while an opened
  // tab's own answer is still to come (swapped first, it would leave that answer no panel).
  var panelRequests = 0;
  var lastTab = 0;
  var tabPending = false;

  function keepLatest(event) {
    var detail = event.detail || {};
    var number = detail.xhr && detail.xhr.panelRequest;
    if (!number) return;
    if (number < lastTab || (tabPending && number !== lastTab)) detail.shouldSwap = false;
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    var detail = event.detail || {};
    if (!detail.xhr || !detail.target || detail.target.id !== "tab-panel") return;
    detail.xhr.panelRequest = ++panelRequests;
    if (detail.elt && detail.elt.getAttribute("role") === "tab") {
      lastTab = detail.xhr.panelRequest;
      tabPending = true;
    }
    // On the panel itself: an answer for a panel already replaced is asked about on that
    // detached element, whose events reach no document listener (its URL would still be
    // pushed into the history).
    detail.target.addEventListener("htmx:beforeSwap", keepLatest);
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    var detail = event.detail || {};
    if (detail.xhr && detail.xhr.panelRequest === lastTab) tabPending = false;
  });

  // Focus across swaps: htmx gives it back to the element with the same id (a tab opened
  // from the keyboard).

  // -- A create form's redraw keeps what the user chose ----------------------------------
  // A zone or type change asks the server for the choices that depend on it, which come
  // back as options for the live selects (hx-swap-oob="innerHTML"); nothing the user typed
  // is redrawn. The answer may come after the user chose again: a select marked
  // data-keeps-choice keeps its value when the new options still offer it (and it is not
  // disabled there), else takes the one the server chose.
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var detail = event.detail || {};
    var select = detail.target;
    if (!select || select.tagName !== "SELECT" || !select.hasAttribute("data-keeps-choice")) return;
    var kept = select.value;
    detail.shouldSwap = false;
    var options = [];
    detail.fragment.childNodes.forEach(function (node) { options.push(node); });
    select.replaceChildren.apply(select, options);
    var still = Array.prototype.some.call(select.options, function (option) {
      return option.value === kept && !option.disabled;
    });
    if (still) select.value = kept;
  });

  document.addEventListener("htmx:beforeSwap", function () { rememberStatuses(); });

  // -- Status changes are announced in the one live region of the page -------------------
  // The polled parts are swapped whole; a live region that is replaced is not read out.

  var statusesBefore = {};
  function badgeKey(badge) {
    var row = badge.closest("tr");
    if (row) return "row:" + (row.getAttribute("data-vm") || (row.cells[0] && row.cells[0].textContent.trim()));
    var header = badge.closest(".detail-header");
    var title = header && header.querySelector("h1");
    return title ? "header:" + title.textContent.trim() : null;
  }
  function readStatuses() {
    var found = {};
    document.querySelectorAll(".badge[data-status]").forEach(function (badge) {
      var key = badgeKey(badge);
      if (key) found[key] = { status: badge.getAttribute("data-status"), label: badge.getAttribute("aria-label") };
    });
    return found;
  }
  function rememberStatuses() { statusesBefore = readStatuses(); }
  function announceChanges() {
    var now = readStatuses();
    var lines = [];
    Object.keys(now).forEach(function (key) {
      var before = statusesBefore[key];
      if (before && before.status !== now[key].status) {
        var line = key.slice(key.indexOf(":") + 1) + " " + now[key].label;
        if (lines.indexOf(line) < 0) lines.push(line);
      }
    });
    statusesBefore = now;
    if (!lines.length) return;
    var region = document.getElementById("live-status");
    if (!region) return;
    region.textContent = "";
    // A new text node after a tick, so the same words said twice are read twice.
    setTimeout(function () { region.textContent = lines.join(". "); }, 50);
  }

  function init(root) {
    (root || document).querySelectorAll("form").forEach(toggleClusterChooser);
  }
  document.addEventListener("DOMContentLoaded", function () { init(document); rememberStatuses(); });
  document.addEventListener("htmx:afterSwap", function (event) { init(event.target); });
  document.addEventListener("htmx:afterSettle", function (event) {
    var target = event.detail.target;
    if (target && target.id === "create-panel" && target.firstElementChild) {
      var field = firstField(target);
      if (field) field.focus();
    } else if (target && target.id === "create-form") {
      // A refused create: the first field in error (the form was swapped, not the target).
      var invalid = document.querySelector("#create-form .has-error input, #create-form .has-error select");
      if (invalid) invalid.focus();
    }
    announceChanges();
  });
})();
