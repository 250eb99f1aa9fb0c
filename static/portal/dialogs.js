// The one confirmation <dialog> of the console (base.html's #confirm-dialog): every action
// that asks first asks here, never with the browser's confirm(). An htmx element asks with
// hx-confirm (htmx's own htmx:confirm event hands the request over); a plain form with
// data-confirm. The words come from the server, already in the reader's language with their
// particles chosen (portal.particles); this script only shows them and waits for a choice.
//
// What the asking element may add (on it or on its form):
//   data-confirm-ok="클러스터 중지"   the confirm button's label (default 확인)
//   data-confirm-danger               the confirm button in red (stop, delete, detach, revoke)
//   data-confirm-detail="…"           a sentence under the question
//   data-confirm-extra="#template"    a <template> copied into the dialog (the stop options)
//   data-confirm-selection            "{n}" in the question is the number of rows ticked for
//                                     the element's form, and their names are listed
//   data-confirm-when="field=value"   ask only when the form's field has that value
// and a checked input of the form with data-confirm-text replaces the question (the 교체
// page's chosen spare names itself). Inside the dialog, a checkbox with data-reveals="#id"
// shows that element while ticked, and one with data-confirm-required must be ticked for the
// confirm button to be usable.
//
// The page may change under an open dialog: a header or a list polls every 2 s and swaps
// itself whole, so the element that asked is no longer on the page when 확인 is pressed, and
// htmx drops a request from a detached element. The confirmation then goes to the element
// that stands for it now (``live``), which sends the same request after the same question;
// when the page no longer offers it, the dialog says so (its data-page-changed) and sends
// nothing.
(function () {
  "use strict";

  var pending = null;  // {elt, send(target)}: what 확인 sends, and from which element
  var opener = null;
  var confirmed = null;  // an element confirmed already: its htmx:confirm is let through

  function dialog() { return document.getElementById("confirm-dialog"); }

  // What an element sends, to where, and what it asks: two elements that agree on all of it
  // are the same action (the one a poll drew anew and the one it replaced).
  var SAID = ["hx-post", "hx-put", "hx-patch", "hx-delete", "hx-get", "action", "formaction",
              "hx-target", "hx-swap", "hx-confirm", "data-confirm"];

  function signature(elt) {
    return elt.tagName + SAID.map(function (name) {
      return " " + name + "=" + (elt.getAttribute(name) || "");
    }).join("");
  }

  // ``elt`` while it is on the page; else the element that replaced it: the one with its id,
  // or else the first of the same action, if it still asks the same question. None: the
  // page no longer offers what was confirmed (gone, or now about other members or names).
  function live(elt) {
    if (!elt || document.body.contains(elt)) return elt;
    var mark = signature(elt);
    var candidates = elt.id ? [document.getElementById(elt.id)] : document.querySelectorAll(elt.tagName);
    for (var i = 0; i < candidates.length; i++) {
      if (candidates[i] && signature(candidates[i]) === mark) return candidates[i];
    }
    return null;
  }

  // htmx handles the event at once, so the mark never outlives it (a delayed trigger would
  // find none and simply ask again).
  function resend(target) {
    confirmed = target;
    try {
      if (target.tagName === "FORM") target.requestSubmit();
      else target.click();
    } finally {
      confirmed = null;
    }
  }

  function attr(elt, form, name) {
    if (elt && elt.hasAttribute(name)) return elt.getAttribute(name);
    if (form && form.hasAttribute(name)) return form.getAttribute(name);
    return null;
  }

  function ticked(form) {
    if (!form || !form.id) return [];
    return Array.prototype.slice.call(
      document.querySelectorAll("input[type=checkbox][name=vm][form='" + form.id + "']:checked")
    );
  }

  function paragraph(text, className) {
    var p = document.createElement("p");
    p.textContent = text;
    if (className) p.className = className;
    return p;
  }

  function syncDialog(box) {
    box.querySelectorAll("input[data-reveals]").forEach(function (input) {
      var shown = box.querySelector(input.getAttribute("data-reveals"));
      if (shown) shown.hidden = !input.checked;
    });
    var ok = box.querySelector("#confirm-ok");
    var required = box.querySelectorAll("input[data-confirm-required]");
    ok.disabled = Array.prototype.some.call(required, function (input) { return !input.checked; });
  }

  function ask(elt, question, proceed) {
    var box = dialog();
    if (!box) return false;
    var form = elt.form || (elt.closest && elt.closest("form"));
    var title = box.querySelector("#confirm-title");
    var body = box.querySelector("#confirm-body");
    var ok = box.querySelector("#confirm-ok");
    var chosen = form && form.querySelector("input:checked[data-confirm-text]");
    var text = chosen ? chosen.getAttribute("data-confirm-text") : question;
    body.textContent = "";
    if (attr(elt, form, "data-confirm-selection") !== null) {
      var rows = ticked(form);
      text = text.replace("{n}", String(rows.length));
      var names = rows.map(function (row) { return row.getAttribute("data-name") || row.value; });
      if (names.length) body.appendChild(paragraph(names.join(", "), "confirm-names"));
    }
    title.textContent = text;
    var detail = attr(elt, form, "data-confirm-detail");
    if (detail) body.appendChild(paragraph(detail));
    var extra = attr(elt, form, "data-confirm-extra");
    var template = extra && document.querySelector(extra);
    if (template && template.content) body.appendChild(template.content.cloneNode(true));
    ok.textContent = attr(elt, form, "data-confirm-ok") || ok.getAttribute("data-default-label");
    var danger = attr(elt, form, "data-confirm-danger") !== null;
    ok.className = "btn " + (danger ? "btn-danger" : "btn-primary");
    pending = {elt: elt, send: proceed};
    opener = elt;
    syncDialog(box);
    box.showModal();
    // The first choice inside, else the safe button for a destructive action, else confirm.
    var first = body.querySelector("input:not([disabled])");
    (first || (danger ? box.querySelector("#confirm-cancel") : ok)).focus();
    return true;
  }

  // data-confirm-when="action=detach": ask only when the form's field has that value (the
  // VM page's 클러스터 section confirms a 분리, not a mistaken empty choice the server refuses).
  function applies(elt) {
    var form = elt.form || (elt.closest && elt.closest("form"));
    var when = attr(elt, form, "data-confirm-when");
    if (!when || !form) return true;
    var parts = when.split("=");
    var field = form.elements[parts[0]];
    return !!field && field.value === parts[1];
  }

  // htmx elements: htmx asks through this event and waits for issueRequest(true).
  document.addEventListener("htmx:confirm", function (event) {
    var detail = event.detail || {};
    if (confirmed !== null && detail.elt === confirmed) {
      confirmed = null;
      event.preventDefault();
      detail.issueRequest(true);
      return;
    }
    if (!detail.question) return;
    if (!applies(detail.elt)) {
      event.preventDefault();
      detail.issueRequest(true);
      return;
    }
    var asker = detail.elt;
    var send = function (target) {
      if (target === asker) detail.issueRequest(true);
      else resend(target);
    };
    if (ask(asker, detail.question, send)) {
      event.preventDefault();
    }
  });

  // Plain forms (no htmx): data-confirm, then the form is sent as it would have been.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.matches || !form.matches("form[data-confirm]") || form.hasAttribute("data-confirmed")) return;
    event.preventDefault();
    ask(form, form.getAttribute("data-confirm"), function (target) {
      target.setAttribute("data-confirmed", "");
      target.submit();
    });
  }, true);

  document.addEventListener("click", function (event) {
    var box = dialog();
    if (!box || !event.target.closest) return;
    if (event.target.closest("#confirm-ok")) {
      event.preventDefault();
      var job = pending;
      pending = null;
      var target = job && live(job.elt);
      if (job && (!target || target.disabled)) {
        gone(box);
        return;
      }
      // Send first: the dialog's own inputs (form="…") are read with the request.
      if (job) job.send(target);
      box.close("ok");
    } else if (event.target.closest("#confirm-cancel")) {
      event.preventDefault();
      box.close("cancel");
    }
  });

  // What was asked is no longer on the page: say so in the dialog, which now only closes.
  function gone(box) {
    var body = box.querySelector("#confirm-body");
    body.textContent = "";
    var said = paragraph(box.getAttribute("data-page-changed"), "reason");
    said.setAttribute("role", "alert");
    body.appendChild(said);
    var ok = box.querySelector("#confirm-ok");
    ok.disabled = true;
    box.querySelector("#confirm-cancel").focus();
  }

  document.addEventListener("change", function (event) {
    var box = dialog();
    if (box && box.contains(event.target)) syncDialog(box);
  });

  // Closed (confirmed, 취소 or Esc): nothing is left to send by accident; the focus goes back
  // to what asked, if it is still on the page.
  document.addEventListener("close", function (event) {
    if (event.target.id !== "confirm-dialog") return;
    pending = null;
    event.target.querySelector("#confirm-body").textContent = "";
    var back = live(opener);
    if (back && event.target.returnValue !== "ok") back.focus();
    opener = null;
  }, true);
})();
