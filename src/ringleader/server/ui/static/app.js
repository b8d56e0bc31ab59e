// ringleader's web UI: small, own, no framework. Pages work without it; it adds
// times in the browser's zone, confirmations and live updates.
"use strict";

const ringleader = (() => {
  const csrf = () => document.querySelector('meta[name="csrf-token"]')?.content || "";

  // <time datetime="...Z" title="... UTC">: shown in the browser's zone, UTC on hover.
  // data-short ("m", "s": with seconds): a table's one-line "Nov 29 09:31" (the year
  // when not this one), the whole time in the browser's zone and in UTC on hover.
  function localTimes(root = document) {
    for (const el of root.querySelectorAll("time[datetime]")) {
      const when = new Date(el.getAttribute("datetime"));
      if (isNaN(when)) continue;
      const full = when.toLocaleString(undefined, { timeZoneName: "short" });
      if (!el.dataset.short) { el.textContent = full; continue; }
      const day = { month: "short", day: "numeric" };
      if (when.getFullYear() !== new Date().getFullYear()) day.year = "numeric";
      const clock = { hour: "2-digit", minute: "2-digit", hourCycle: "h23" };
      if (el.dataset.short === "s") clock.second = "2-digit";
      el.textContent = `${when.toLocaleDateString(undefined, day)} ${when.toLocaleTimeString(undefined, clock)}`;
      if (!el.dataset.utc) el.dataset.utc = el.title;
      el.title = `${full} (${el.dataset.utc})`;
    }
  }

  // A same-origin fetch that carries the CSRF token; a lost session goes to login.
  async function request(url, options = {}) {
    const headers = { "X-Requested-With": "fetch", "X-CSRF-Token": csrf(), ...(options.headers || {}) };
    const response = await fetch(url, { credentials: "same-origin", ...options, headers });
    if (response.status === 401) {
      const body = await response.json().catch(() => ({}));
      window.location.assign(body.login || "/login");
      throw new Error("logged out");
    }
    return response;
  }

  // Poll ``url`` every ``everyMs`` while the tab is visible; ``apply`` gets the JSON.
  function poll(url, everyMs, apply) {
    let timer = null;
    const tick = async () => {
      timer = null;
      if (!document.hidden) {
        try {
          const response = await request(typeof url === "function" ? url() : url);
          if (response.ok) await apply(await response.json());
        } catch (err) { /* the next tick tries again */ }
      }
      timer = setTimeout(tick, everyMs);
    };
    timer = setTimeout(tick, everyMs);
    return () => timer && clearTimeout(timer);
  }

  // <form data-confirm="Delete x?">: asks first. Its hidden ``confirmed`` field then
  // says so, and the server skips the confirmation page it shows without script.
  document.addEventListener("submit", (event) => {
    const message = event.target.getAttribute("data-confirm");
    if (!message) return;
    if (!window.confirm(message)) { event.preventDefault(); return; }
    const confirmed = event.target.querySelector('input[name="confirmed"]');
    if (confirmed) confirmed.value = "yes";
  });

  // Copy ``source``'s text: to the clipboard, else (plain http, or refused) select it
  // for Ctrl+C; the button (and a #copy-state live region, if any) says which.
  async function copyFrom(source, button) {
    let copied = false;
    try {
      await navigator.clipboard.writeText(source.textContent);
      copied = true;
    } catch (err) {
      const range = document.createRange();
      range.selectNodeContents(source);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      copied = Boolean(document.execCommand && document.execCommand("copy"));
    }
    button.textContent = copied ? "Copied" : "Selected: press Ctrl+C";
    const state = document.getElementById("copy-state");
    if (state) state.textContent = button.textContent;
    setTimeout(() => { button.textContent = "Copy"; }, 2000);
  }

  // <button class="copy" data-copy="ID" hidden>: copies #ID's text; shown only once
  // this script runs, so a page without script never shows a dead button.
  function copyButtons(root = document) {
    for (const button of root.querySelectorAll("button.copy[data-copy]")) {
      const source = document.getElementById(button.dataset.copy);
      if (!source || button.dataset.wired) continue;
      button.dataset.wired = "1";
      button.hidden = false;
      button.addEventListener("click", () => copyFrom(source, button));
    }
  }

  document.addEventListener("DOMContentLoaded", () => { localTimes(); copyButtons(); });
  return { csrf, request, poll, localTimes, copyFrom, copyButtons };
})();
