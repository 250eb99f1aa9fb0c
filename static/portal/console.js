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
    if (action && chooser) chooser.hidden = action.value === "detach";
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
      close.closest("#create-panel").innerHTML = "";
    }
  });

  function init(root) {
    (root || document).querySelectorAll("form").forEach(toggleClusterChooser);
  }
  document.addEventListener("DOMContentLoaded", function () { init(document); });
  document.addEventListener("htmx:afterSwap", function (event) { init(event.target); });
})();
