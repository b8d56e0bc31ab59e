// The workloads page: live rows without reloading, filters that apply on change,
// a copy button for Connect's command. The page works without this script.
"use strict";

(() => {
  const table = document.getElementById("wl-table");
  if (!table) return;
  const rows = document.getElementById("wl-rows");
  const range = document.getElementById("wl-range");
  const filters = document.querySelector("form.wl-filters");
  let version = table.dataset.version;

  // A script asks before deleting (app.js's data-confirm), so no confirmation page.
  function markConfirmed(root) {
    for (const input of root.querySelectorAll("input.wl-confirmed")) input.value = "yes";
  }

  function addCopyButtons(root) {
    if (!navigator.clipboard) return;
    for (const code of root.querySelectorAll("code.wl-command")) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "wl-copy";
      button.textContent = "Copy";
      button.setAttribute("aria-label", "Copy the command");
      button.addEventListener("click", async () => {
        await navigator.clipboard.writeText(code.textContent);
        button.textContent = "Copied";
      });
      code.after(button);
    }
  }

  // What the user is in the middle of survives a swap: open Connect panels, focus.
  function remember() {
    const open = [...rows.querySelectorAll("details[open]")].map((d) => d.closest("tr").dataset.id);
    const active = document.activeElement;
    let focus = null;
    if (active && rows.contains(active)) {
      const row = active.closest("tr");
      focus = { id: row.dataset.id, label: active.getAttribute("aria-label") || active.textContent };
    }
    return { open, focus };
  }

  function restore({ open, focus }) {
    for (const id of open) {
      const details = rows.querySelector(`tr[data-id="${CSS.escape(id)}"] details`);
      if (details) details.open = true;
    }
    if (focus) {
      const row = rows.querySelector(`tr[data-id="${CSS.escape(focus.id)}"]`);
      const again = row && [...row.querySelectorAll("a, button, summary")].find(
        (el) => (el.getAttribute("aria-label") || el.textContent) === focus.label);
      if (again) again.focus();
    }
  }

  function apply(data) {
    if (data.rows === undefined) return; // nothing changed
    const kept = remember();
    rows.innerHTML = data.rows;
    version = data.v;
    table.dataset.version = version;
    if (range && data.range) range.textContent = data.range;
    const empty = document.getElementById("wl-empty");
    if (empty) empty.hidden = data.total > 0;
    ringleader.localTimes(rows);
    markConfirmed(rows);
    addCopyButtons(rows);
    restore(kept);
  }

  function liveUrl() {
    const params = new URLSearchParams(window.location.search);
    params.set("version", version);
    return "/workloads/live?" + params.toString();
  }

  if (filters) {
    for (const select of filters.querySelectorAll("select")) {
      select.addEventListener("change", () => filters.requestSubmit());
    }
  }
  markConfirmed(document);
  addCopyButtons(document);
  if (version) ringleader.poll(liveUrl, 2000, apply);
})();
