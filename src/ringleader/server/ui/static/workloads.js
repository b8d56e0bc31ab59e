// The workloads page: live rows without reloading and a copy button for Connect's
// command. Filters apply with their Apply button (no submit on change: a keyboard
// user moving through a select's options must not reload the page at each step).
// The page works without this script.
"use strict";

(() => {
  const table = document.getElementById("wl-table");
  if (!table) return; // a refused query: no table
  const rows = document.getElementById("wl-rows");
  const range = document.getElementById("wl-range");
  let version = table.dataset.version;

  function addCopyButtons(root) {
    for (const code of root.querySelectorAll("code.wl-command")) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "wl-copy";
      button.textContent = "Copy";
      button.setAttribute("aria-label", "Copy the command");
      button.addEventListener("click", () => ringleader.copyFrom(code, button));
      code.after(button);
    }
  }

  // A workload is its row and, when it waits or failed, the reason's row under it.
  const mainRows = () => [...rows.children].filter((tr) => tr.dataset.v);
  const withReason = (tr) => {
    const after = tr.nextElementSibling;
    return after && after.classList.contains("wl-why") ? [tr, after] : [tr];
  };

  // The page's rows in the server's order: rows the browser has are kept as they are
  // (an open Connect panel, the focus stay), the new or changed ones come as HTML.
  function apply(data) {
    if (data.order === undefined) return; // nothing changed
    const kept = new Map(mainRows().map((tr) => [tr.dataset.v, withReason(tr)]));
    const active = document.activeElement;
    const focusRow = active && rows.contains(active) ? active.closest("tr[data-id]")?.dataset.id : null;
    const next = [];
    for (const v of data.order) {
      if (kept.has(v)) {
        next.push(...kept.get(v));
      } else if (data.rows[v]) {
        const holder = document.createElement("tbody");
        holder.innerHTML = data.rows[v];
        const tr = holder.querySelector("tr[data-v]");
        const old = [...kept.values()].find(([row]) => row.dataset.id === tr.dataset.id);
        if (old && old[0].querySelector("details[open]")) {
          const details = tr.querySelector("details");
          if (details) details.open = true;
        }
        ringleader.localTimes(holder);
        addCopyButtons(holder);
        next.push(...holder.children);
      }
    }
    rows.replaceChildren(...next);
    version = data.v;
    table.dataset.version = version;
    if (range && data.range) range.textContent = data.range;
    const empty = document.getElementById("wl-empty");
    if (empty) empty.hidden = data.total > 0;
    if (focusRow && !rows.contains(active)) {
      const again = rows.querySelector(`tr[data-id="${CSS.escape(focusRow)}"] a`);
      if (again) again.focus();
    }
  }

  function liveUrl() {
    const params = new URLSearchParams(window.location.search);
    params.set("version", version);
    params.set("have", mainRows().map((tr) => tr.dataset.v).join("."));
    return "/workloads/live?" + params.toString();
  }

  addCopyButtons(document);
  if (version) ringleader.poll(liveUrl, 2000, apply);
})();
