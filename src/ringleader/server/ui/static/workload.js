// One workload's page: live status/pods/events, live logs (pod filter, follow/pause,
// search, download) and live charts. The page is whole without it; this adds the updates.
"use strict";

(() => {
  const root = document.getElementById("workload");
  if (!root) return;
  const id = encodeURIComponent(root.dataset.id);
  const base = `/workloads/${id}`;
  let version = root.dataset.version;
  let finished = root.dataset.final === "true";
  const LIVE_MS = 2000, LOG_MS = 1500, METRICS_MS = 3000, MAX_DOM_LINES = 5000;

  // ----- status, actions, summary, pods, events -----------------------------------------
  async function live() {
    try {
      const response = await ringleader.request(`${base}/live?version=${encodeURIComponent(version)}`);
      if (response.status === 404) { // deleted (or no longer visible): nothing more to show
        finished = true;
        document.getElementById("piece-status").textContent = "This workload is gone: it was deleted.";
        return;
      }
      if (!response.ok) return;
      const body = await response.json();
      version = body.version;
      if (!body.same) {
        for (const [key, text] of Object.entries(body.pieces)) {
          const holder = document.getElementById(`piece-${key}`);
          if (holder && holder.innerHTML !== text) {
            holder.innerHTML = text; // server-rendered, escaped by the template
            ringleader.localTimes(holder);
          }
        }
      }
      if (body.final && !finished) { finished = true; logsEnd(); noticeEnded(); }
    } catch (err) { /* the next tick tries again */ }
  }
  // A notice of what was just done ("Workload x created", "Stopping x.") is stale once
  // the workload has ended: it gives way to the final state, as words and colour.
  function noticeEnded() {
    const notice = document.getElementById("notice");
    const phase = document.querySelector("#piece-status .workload-status .status");
    if (!notice || !phase || notice.dataset.ended) return;
    notice.dataset.ended = "true";
    const name = document.querySelector(".workload-head h1").textContent;
    notice.replaceChildren(`Workload ${name} has ended: `, phase.cloneNode(true));
  }
  if (finished) noticeEnded();
  (function tick() {
    setTimeout(async () => { if (!document.hidden) await live(); if (!finished) tick(); }, LIVE_MS);
  })();

  // ----- logs ------------------------------------------------------------------------------
  const log = document.getElementById("log");
  const logState = document.getElementById("log-state");
  const podSelect = document.getElementById("log-pod");
  const followButton = document.getElementById("log-follow");
  const search = document.getElementById("log-search");
  const onlyMatching = document.getElementById("log-only");
  let cursor = "", following = true, logCount = 0, logsDone = false, logBusy = false;

  function lineNode(item) {
    const span = document.createElement("span");
    span.className = "line";
    span.dataset.text = item.text;
    span.dataset.pod = item.pod;
    paint(span);
    return span;
  }

  // A line's content, with the search's matches marked; hidden when "only matching".
  function paint(span) {
    const term = search.value.trim().toLowerCase();
    const text = span.dataset.text;
    const pod = document.createElement("span");
    pod.className = "pod";
    pod.textContent = span.dataset.pod ? `[${span.dataset.pod}] ` : "";
    span.replaceChildren(pod);
    const lower = text.toLowerCase();
    let at = 0, matched = false;
    if (term) {
      for (let hit = lower.indexOf(term); hit >= 0; hit = lower.indexOf(term, at)) {
        span.append(text.slice(at, hit));
        const mark = document.createElement("mark");
        mark.textContent = text.slice(hit, hit + term.length);
        span.append(mark);
        at = hit + term.length;
        matched = true;
      }
    }
    span.append(text.slice(at) + "\n");
    span.classList.toggle("hidden", Boolean(term) && onlyMatching.checked && !matched);
    return matched;
  }

  function repaint() {
    for (const span of log.children) paint(span);
    describe();
  }

  function describe() {
    const term = search.value.trim();
    let text = logCount ? `${logCount} line${logCount === 1 ? "" : "s"}` : logsDone ? "No output" : "No log lines yet";
    if (term) text += `, ${countMatches()} matching “${term}”`;
    text += finished ? (logsDone ? " · the workload ended" : "") : following ? " · following" : " · paused";
    logState.textContent = text;
  }
  function countMatches() {
    let n = 0;
    for (const span of log.children) if (span.querySelector("mark")) n++;
    return n;
  }

  async function pollLogs(force = false) {
    if (logBusy || (!following && !force && !finished) || logsDone) return;
    logBusy = true;
    try {
      const pod = podSelect.value;
      const params = new URLSearchParams({ cursor });
      if (pod) params.set("pod", pod);
      const response = await ringleader.request(`${base}/logs/live?${params}`);
      if (!response.ok || pod !== podSelect.value) return;
      const body = await response.json();
      cursor = body.cursor;
      const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
      if (body.skipped) {
        log.append(lineNode({ pod: "", text: `… ${body.skipped} earlier lines not shown (Download has them all)` }));
      }
      const fragment = document.createDocumentFragment();
      for (const item of body.lines) fragment.append(lineNode(item));
      log.append(fragment);
      logCount += body.lines.length;
      while (log.children.length > MAX_DOM_LINES) log.firstElementChild.remove();
      if (following && atBottom) log.scrollTop = log.scrollHeight;
      if (finished && !body.lines.length) logsDone = true; // read once more after the end
      describe();
    } catch (err) { /* the next tick tries again */ } finally { logBusy = false; }
  }

  function resetLogs() {
    cursor = ""; logCount = 0; logsDone = false;
    log.replaceChildren();
    pollLogs(true);
  }
  podSelect.addEventListener("change", resetLogs);
  followButton.addEventListener("click", () => {
    following = !following;
    followButton.setAttribute("aria-pressed", String(following));
    followButton.textContent = following ? "Pause" : "Follow";
    if (following) { pollLogs(); log.scrollTop = log.scrollHeight; }
    describe();
  });
  // Once the workload has ended there is nothing to follow or pause: the rest is read
  // once (without scrolling a reader who had paused) and the button goes.
  function logsEnd() {
    following = true;
    followButton.setAttribute("aria-pressed", "true");
    followButton.textContent = "Pause";
    followButton.hidden = true;
    describe();
  }
  if (finished) logsEnd();
  search.addEventListener("input", repaint);
  onlyMatching.addEventListener("change", repaint);
  pollLogs(true);
  setInterval(() => { if (!document.hidden) pollLogs(); }, LOG_MS);

  // ----- charts ---------------------------------------------------------------------------
  const ranks = new Map(); // "pod · rank N" -> {rank, pod, points: []}
  const pods = new Map(); // pod -> {node, points: []}
  let since = null, t0 = null, tEnd = null, metricsDone = false, collected = true, totalNow = null;
  const MAX_KEPT = 4000;

  // Points kept per series: past the cap every other one goes (the last stays), so a
  // long run is kept whole at a coarser grain, never cut to its latest minutes.
  function keep(list, more) {
    list.push(...more);
    while (list.length > MAX_KEPT) {
      const last = list[list.length - 1];
      const halved = list.filter((_, i) => i % 2 === 0);
      if (halved[halved.length - 1] !== last) halved.push(last);
      list.splice(0, list.length, ...halved);
    }
  }
  const seen = (time) => {
    if (t0 === null || time < t0) t0 = time;
    if (tEnd === null || time > tEnd) tEnd = time;
  };

  // Where a step's time goes (runtime.prepare's timers, the server's stepSplit):
  // compute, and the communication the backward pass could not hide.
  function showSplit(split) {
    const box = document.getElementById("step-split");
    if (!box) return;
    const ms = (s) => (s >= 1 ? `${s.toFixed(2)} s` : `${Math.round(s * 1000)} ms`);
    const share = split.stepTime > 0 ? Math.min(1, split.commTime / split.stepTime) : 0;
    box.querySelector(".split-text").textContent =
      `Step ${ms(split.stepTime)}: compute ${ms(split.computeTime)}, ` +
      `communication ${ms(split.commTime)} (${split.bound}-bound)`;
    box.querySelector(".split-note").textContent =
      `(the mean of ${split.ranks} rank${split.ranks === 1 ? "" : "s"}' latest steps; ` +
      "communication: the wait the backward pass could not hide)";
    box.querySelector(".split-bar .split-compute").style.width = `${(1 - share) * 100}%`;
    box.querySelector(".split-bar .split-comm").style.width = `${share * 100}%`;
    box.classList.toggle("network", split.bound === "network");
    box.hidden = false;
  }

  async function pollMetrics() {
    if (metricsDone) return;
    try {
      const url = since === null ? `${base}/metrics` : `${base}/metrics?since=${since}`;
      const response = await ringleader.request(url);
      if (!response.ok) return;
      const m = await response.json();
      collected = m.collected;
      if (m.totalSamplesPerSecond !== null && m.totalSamplesPerSecond !== undefined) totalNow = m.totalSamplesPerSecond;
      if (m.stepSplit) showSplit(m.stepSplit);
      for (const s of m.series || []) {
        const key = `${s.pod} · rank ${s.rank}`;
        if (!ranks.has(key)) ranks.set(key, { rank: s.rank, points: [] });
        keep(ranks.get(key).points, s.points);
        for (const p of s.points) seen(p.time);
      }
      for (const r of m.resources || []) {
        if (!pods.has(r.pod)) pods.set(r.pod, { node: r.node, points: [] });
        const known = pods.get(r.pod);
        const last = known.points.length ? known.points[known.points.length - 1].time : -Infinity;
        keep(known.points, (r.points || []).filter((p) => p.time > last));
        for (const p of r.points || []) seen(p.time);
      }
      if (m.until !== null && m.until !== undefined) { since = m.until; seen(m.until); }
      drawCharts();
      // One read after the end, then no more; unless a cap left some unread (partial):
      // a long run's points come in more than one answer, and all of them are charted.
      if (finished && !m.partial) metricsDone = true;
    } catch (err) { /* the next tick tries again */ }
  }

  const figure = (name) => document.getElementById(`chart-${name}`);
  const elapsed = (t) => t - (t0 ?? t);
  const sorted = () => [...ranks.entries()].sort((a, b) => a[1].rank - b[1].rank);
  const seconds = (v) => charts.number(v) + " s";
  const afterStart = (x) => `${x.toFixed(1)} s after start`;
  const SINCE = "seconds since start";

  function totalRate() {
    // Every rank's latest rate, summed, at each record's time.
    const all = [];
    for (const [key, s] of ranks) for (const p of s.points) if (p.samplesPerSecond != null) all.push([p.time, key, p.samplesPerSecond]);
    all.sort((a, b) => a[0] - b[0]);
    const latest = new Map(), out = [];
    for (const [time, key, rate] of all) {
      latest.set(key, rate);
      let sum = 0; for (const v of latest.values()) sum += v;
      out.push([elapsed(time), sum]);
    }
    return out;
  }

  function drawCharts() {
    const none = collected ? "No points yet: the ranks report with ringleader.runtime.report(step=..., loss=..., samples=...)."
      : "This backend does not collect what the ranks report.";
    charts.draw(figure("loss"), { title: "Loss per rank", xLabel: "step", yLabel: "loss", empty: none,
      series: sorted().map(([key, s]) => ({ name: key, points: s.points.map((p) => [p.step, p.loss]) })) });
    // The time charts share one x axis, the whole run so far: a rate reported for a few
    // seconds of it shows when those were, not stretched over the chart.
    const run = tEnd === null ? undefined : [0, elapsed(tEnd)];
    const rate = sorted().map(([key, s]) => ({ name: key, points: s.points.map((p) => [elapsed(p.time), p.samplesPerSecond]) }));
    if (ranks.size > 1) rate.push({ name: "total", points: totalRate() });
    charts.draw(figure("rate"), { title: "Samples per second" + (totalNow !== null ? ` (latest total ${charts.number(totalNow)})` : ""),
      xLabel: SINCE, at: afterStart, yLabel: "samples/s", fromZero: true, empty: none, series: rate,
      xRange: run, smooth: true, xUnit: "s" });
    charts.draw(figure("step"), { title: "Step time", xLabel: "step", yLabel: "seconds per step", empty: none,
      fromZero: true, formatY: seconds, series: sorted().map(([key, s]) => ({ name: key, points: s.points.map((p) => [p.step, p.stepTime]) })) });
    const perPod = [...pods.entries()].sort((a, b) => a[0].localeCompare(b[0]));
    const noUse = "No CPU/memory samples yet.";
    charts.draw(figure("cpu"), { title: "CPU per pod", xLabel: SINCE, at: afterStart, yLabel: "CPU cores", fromZero: true, empty: noUse, xRange: run,
      series: perPod.map(([pod, r]) => ({ name: pod, points: r.points.map((p) => [elapsed(p.time), p.cpu]) })) });
    // Memory in MiB or GiB (whichever reads better), so the ticks are round numbers.
    let most = 0;
    for (const [, r] of perPod) for (const p of r.points) if (p.memoryBytes > most) most = p.memoryBytes;
    const [unit, size] = most >= 2 * 2 ** 30 ? ["GiB", 2 ** 30] : ["MiB", 2 ** 20];
    charts.draw(figure("memory"), { title: "Memory per pod", xLabel: SINCE, at: afterStart, yLabel: "memory", fromZero: true, empty: noUse, xRange: run,
      formatY: (v) => `${charts.number(v)} ${unit}`,
      series: perPod.map(([pod, r]) => ({ name: pod, points: r.points.map((p) => [elapsed(p.time), p.memoryBytes == null ? null : p.memoryBytes / size]) })) });
  }
  drawCharts();
  pollMetrics();
  // Charts are drawn at their figure's width: a window that changes width redraws them.
  let resizing = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => {
      const changed = [...document.querySelectorAll("figure.chart")].some(
        (f) => f.dataset.drawnWidth && Math.floor(f.getBoundingClientRect().width) - 2 !== Number(f.dataset.drawnWidth));
      if (changed) drawCharts();
    }, 150);
  });
  setInterval(() => { if (!document.hidden) pollMetrics(); }, METRICS_MS);
})();
