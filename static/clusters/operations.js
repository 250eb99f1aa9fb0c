// Cluster-scale operations: the 가상머신 연결 dialog (its search box), selection checkboxes,
// progress cards (a finished one gives way to the next: the 활동 tab keeps them all) and
// toasts. Loaded with the CSP nonce; no inline handlers. Everything a button may do was
// decided by the server; this only wires it. Confirmations are base.html's #confirm-dialog
// (static/portal/dialogs.js).
(function () {
  "use strict";

  var TOAST_MS = 5000;

  function toastBox() {
    var box = document.getElementById("toasts");
    if (!box) {
      box = document.createElement("div");
      box.id = "toasts";
      box.className = "toasts";
      box.setAttribute("aria-hidden", "true"); // read out through the page's one live region
      document.body.appendChild(box);
    }
    return box;
  }

  // A short message for an action's outcome: the server sends it as an HX-Trigger "toast".
  // Seen in the corner, heard through base.html's #live-status (the page's one live region).
  function showToast(message) {
    if (!message) return;
    var toast = document.createElement("div");
    toast.className = "toast";
    toast.textContent = message;
    toastBox().appendChild(toast);
    setTimeout(function () { toast.remove(); }, TOAST_MS);
    var region = document.getElementById("live-status");
    if (region) {
      region.textContent = "";
      setTimeout(function () { region.textContent = message; }, 50);
    }
  }

  document.body.addEventListener("toast", function (event) {
    showToast(event.detail && event.detail.message);
  });

  function closeDialogs() {
    document.querySelectorAll("dialog[open]").forEach(function (dialog) { dialog.close(); });
  }
  document.body.addEventListener("close-dialogs", closeDialogs);

  // A refresh of a tab (the header poll's cluster-changed while members start one by one)
  // redraws the member table: the rows the user had ticked stay ticked (htmx itself puts the
  // focus back on an element with an id). Read just before the swap and put back just after
  // it, in the same task, so no other poll's swap can come in between. Only a refresh keeps
  // them: an action sent with the selection (a POST of its form) that the server took (2xx;
  // a refusal is shown in place and keeps the selection) clears it.
  var kept = null;

  function selectionKey(box) {
    return (box.getAttribute("form") || "") + " " + box.value;
  }

  document.addEventListener("htmx:beforeSwap", function (event) {
    kept = null;
    var target = event.detail && event.detail.target;
    var config = event.detail && event.detail.requestConfig;
    if (!target || !config || config.verb !== "get") return;
    var boxes = target.querySelectorAll("input[type=checkbox][name=vm]:checked");
    if (boxes.length) kept = Array.prototype.map.call(boxes, selectionKey);
  });

  function restoreSelection() {
    if (!kept) return;
    var keys = kept;
    kept = null;
    document.querySelectorAll("input[type=checkbox][name=vm]").forEach(function (box) {
      if (!box.disabled && !box.checked && keys.indexOf(selectionKey(box)) !== -1) {
        box.checked = true;
      }
    });
  }

  document.addEventListener("htmx:afterRequest", function (event) {
    var detail = event.detail || {};
    var form = detail.elt && detail.elt.closest ? detail.elt.closest("form") : null;
    var verb = detail.requestConfig && detail.requestConfig.verb;
    var status = detail.xhr ? detail.xhr.status : 0;
    if (!form || !form.id || verb !== "post" || status < 200 || status >= 300) return;
    document.querySelectorAll("input[type=checkbox][name=vm][form='" + form.id + "']")
      .forEach(function (box) { box.checked = false; });
    syncSelection();
  });

  // The attach panel arrives in its <dialog>: open it and focus the first choice.
  document.addEventListener("htmx:afterSwap", function (event) {
    var target = event.detail && event.detail.target;
    if (target && target.tagName === "DIALOG") {
      if (!target.open) target.showModal();
      var first = target.querySelector("input:not([disabled]), button:not([disabled])");
      if (first) first.focus();
    }
    restoreSelection();
    syncSelection();
  });

  // Selected-member buttons are usable only when a checked row can take their action.
  function syncSelection() {
    document.querySelectorAll("[data-needs-selection]").forEach(function (button) {
      var flag = button.getAttribute("data-needs-selection");
      var form = button.form && button.form.id;
      var selector = "input[name=vm][form='" + form + "']:checked[data-" + flag + "]";
      button.disabled = !(form && document.querySelector(selector));
    });
  }

  document.addEventListener("change", function (event) {
    var el = event.target;
    if (!el.matches) return;
    if (el.matches("input[data-select-all]")) {
      // What the search box hides is not selected with the rest.
      document.querySelectorAll(el.getAttribute("data-select-all")).forEach(function (box) {
        if (!box.disabled && !box.closest("[hidden]")) box.checked = el.checked;
      });
    }
    if (el.matches("input[data-enables]")) {
      // 멤버 가상머신도 함께 중지: the stop the rule refuses alone becomes possible.
      var button = document.querySelector(el.getAttribute("data-enables"));
      if (button) button.disabled = !el.checked && button.hasAttribute("data-refused");
    }
    syncSelection();
  });

  // The attach dialog's search: rows whose name does not contain the words are hidden.
  document.addEventListener("input", function (event) {
    var el = event.target;
    if (!el.matches || !el.matches("input[data-filter-list]")) return;
    var words = el.value.trim().toLowerCase();
    var shown = 0;
    document.querySelectorAll(el.getAttribute("data-filter-list") + " > [data-name]").forEach(function (row) {
      row.hidden = words !== "" && row.getAttribute("data-name").indexOf(words) === -1;
      if (!row.hidden) shown += 1;
    });
    var empty = document.querySelector(el.getAttribute("data-filter-empty"));
    if (empty) empty.hidden = shown > 0;
  });

  // Finished cards do not stack: the newest one stays until the next action starts; the
  // 활동 tab lists them all.
  function collapseFinished(keepNewest) {
    var done = document.querySelectorAll("#operations .op-card.op-done");
    Array.prototype.forEach.call(done, function (card, index) {
      if (!keepNewest || index > 0) card.remove();
    });
  }
  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail && event.detail.target;
    if (target && target.id === "operations") collapseFinished(false);
  });
  document.addEventListener("htmx:afterSettle", function (event) {
    var target = event.detail && event.detail.target;
    if (target && target.classList && target.classList.contains("op-card")) collapseFinished(true);
  });

  // 닫기 folds the card away (its height to nothing) rather than pulling the page up at once;
  // with reduced motion it simply goes.
  function closeCard(card) {
    var reduced = window.matchMedia && window.matchMedia("(prefers-reduced-motion: reduce)").matches;
    if (reduced || !card.animate) { card.remove(); return; }
    var from = card.getBoundingClientRect().height;
    card.style.overflow = "hidden";
    var folding = card.animate(
      [{ height: from + "px", opacity: 1 }, { height: "0px", opacity: 0, paddingTop: "0px", paddingBottom: "0px", borderWidth: "0px" }],
      { duration: 200, easing: "ease-out" }
    );
    folding.onfinish = function () { card.remove(); };
  }

  document.addEventListener("click", function (event) {
    if (!event.target.closest) return;
    var close = event.target.closest("[data-close-dialog]");
    if (close && close.closest("dialog")) {
      event.preventDefault();
      close.closest("dialog").close();
      return;
    }
    var dismiss = event.target.closest("[data-dismiss]");
    if (dismiss && dismiss.closest(".op-card")) closeCard(dismiss.closest(".op-card"));
  });

  // A dialog closed (Esc or 취소) leaves nothing behind to submit by accident.
  document.addEventListener("close", function (event) {
    if (event.target.id === "attach-dialog") event.target.innerHTML = "";
  }, true);

  document.addEventListener("DOMContentLoaded", syncSelection);
})();
