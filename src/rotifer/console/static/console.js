// rotifer console: the little the pages do in script (served from the package; the CSP
// allows only this file and htmx). Everything works without it as plain forms and links.
"use strict";
document.addEventListener("htmx:afterSwap", (event) => {
  // A confirmation swapped into the dialog opens it as a modal: focus moves inside
  // (to Cancel), the page behind is inert, Esc closes it.
  if (event.detail.target && event.detail.target.id === "dialog-body") {
    const dialog = document.getElementById("dialog");
    if (!dialog.open) dialog.showModal();
    const first = dialog.querySelector("[autofocus]");
    if (first) first.focus();
  }
});
document.addEventListener("change", (event) => {
  // "Select every entry on this page" ticks (or clears) each row's box.
  if (event.target.id === "select-all") {
    for (const box of document.querySelectorAll("#entries input[name=ref]")) {
      box.checked = event.target.checked;
    }
  }
});
