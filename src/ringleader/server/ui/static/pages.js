// Projects, nodes and admin pages: Copy buttons (the new-secret page). A button is
// hidden until this script runs, so a page without script never shows a dead one;
// the text stays selectable by hand either way.
"use strict";

(() => {
  const state = document.getElementById("copy-state");
  for (const button of document.querySelectorAll("button.copy[data-copy]")) {
    const source = document.getElementById(button.dataset.copy);
    if (!source) continue;
    button.hidden = false;
    button.addEventListener("click", async () => {
      let copied = false;
      try {
        await navigator.clipboard.writeText(source.textContent);
        copied = true;
      } catch (err) {
        // No clipboard (plain http, or refused): select the text for Ctrl+C instead.
        const range = document.createRange();
        range.selectNodeContents(source);
        const selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
        copied = Boolean(document.execCommand && document.execCommand("copy"));
      }
      button.textContent = copied ? "Copied" : "Selected: press Ctrl+C";
      if (state) state.textContent = button.textContent;
      setTimeout(() => { button.textContent = "Copy"; }, 2000);
    });
  }
})();
