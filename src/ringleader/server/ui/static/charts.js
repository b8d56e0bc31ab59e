// Line charts drawn as SVG by our own code: axes with ticks, axis labels, a legend,
// and a text alternative (the last values in words, a table in <details>).
// Series differ by dash pattern and marker shape, not by colour alone.
// No inline styles (the page's CSP forbids them): sizes are SVG attributes.
"use strict";

const charts = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const W = 560, H = 250, RIGHT = 14, TOP = 12, BOTTOM = 44;
  const MIN_W = 280, MAX_W = 1400; // drawn at the figure's width, within these
  const TITLE_BAND = 20, TICK_GAP = 6; // the y axis title's band; ticks' gap to the axis
  const COLORS = ["#0b5cad", "#b42318", "#1a7f37", "#9a6700", "#6f42c1", "#0e7490", "#c2410c", "#475569"];
  const DASHES = ["", "7 4", "2 3", "10 3 2 3", "4 4", "12 5"];
  const MARKERS = ["circle", "square", "triangle", "diamond", "cross", "triangle-down"];
  const MAX_DRAWN = 600; // points drawn per series (the table keeps the numbers)
  const MARKS_PER_SERIES = 10;
  // A smoothed chart averages over 1/25 of its x axis, and over 12 reports at least.
  const SMOOTH_PARTS = 25, SMOOTH_POINTS = 12;

  function el(name, attrs = {}, parent = null) {
    const node = document.createElementNS(NS, name);
    for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
    if (parent) parent.appendChild(node);
    return node;
  }

  function html(name, text, parent) {
    const node = document.createElement(name);
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }

  function number(v) {
    if (v === null || v === undefined || !isFinite(v)) return "-";
    const a = Math.abs(v);
    if (a !== 0 && (a < 0.001 || a >= 1e6)) return v.toExponential(2);
    return Number(v.toPrecision(4)).toString();
  }

  // Round tick values spanning [lo, hi].
  function ticks(lo, hi, count = 5) {
    if (!(hi > lo)) { hi = lo + 1; }
    const raw = (hi - lo) / count;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
    const first = Math.ceil(lo / step) * step;
    const out = [];
    for (let v = first; v <= hi + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
    return out;
  }

  function marker(shape, x, y, color, parent) {
    const r = 3.5;
    const common = { class: "marker", fill: color, stroke: color };
    if (shape === "circle") return el("circle", { ...common, cx: x, cy: y, r }, parent);
    if (shape === "square") return el("rect", { ...common, x: x - r, y: y - r, width: 2 * r, height: 2 * r }, parent);
    if (shape === "cross") {
      return el("path", { class: "marker", stroke: color, "stroke-width": 2, fill: "none",
        d: `M${x - r},${y - r}L${x + r},${y + r}M${x - r},${y + r}L${x + r},${y - r}` }, parent);
    }
    const pts = {
      triangle: [[0, -r - 1], [r + 1, r], [-r - 1, r]],
      "triangle-down": [[0, r + 1], [r + 1, -r], [-r - 1, -r]],
      diamond: [[0, -r - 1], [r + 1, 0], [0, r + 1], [-r - 1, 0]],
    }[shape];
    return el("polygon", { ...common, points: pts.map(([dx, dy]) => `${x + dx},${y + dy}`).join(" ") }, parent);
  }

  function thin(points) {
    if (points.length <= MAX_DRAWN) return points;
    const every = Math.ceil(points.length / MAX_DRAWN);
    const out = points.filter((_, i) => i % every === 0);
    if (out[out.length - 1] !== points[points.length - 1]) out.push(points[points.length - 1]);
    return out;
  }

  // A centred moving average over ``window`` (x units) of points sorted by x: a noisy
  // per-report rate reads as its trend. The ends average the half window they have.
  function smooth(points, window) {
    if (!(window > 0) || points.length < 3) return points;
    const out = [];
    let lo = 0, hi = 0, sum = 0;
    for (const [x] of points) {
      while (hi < points.length && points[hi][0] <= x + window / 2) sum += points[hi++][1];
      while (points[lo][0] < x - window / 2) sum -= points[lo++][1];
      out.push([x, sum / (hi - lo)]);
    }
    return out;
  }

  // The series' typical (median) x step between two reports.
  function spacing(series) {
    const gaps = [];
    for (const s of series) {
      for (let k = 1; k < s.points.length; k++) {
        const dx = s.points[k][0] - s.points[k - 1][0];
        if (dx > 0) gaps.push(dx);
      }
    }
    gaps.sort((a, b) => a - b);
    return gaps.length ? gaps[Math.floor(gaps.length / 2)] : 0;
  }

  // How wide a label is drawn: measured when the SVG is on screen, else estimated.
  function textWidth(node) {
    let width = 0;
    try { width = node.getComputedTextLength(); } catch (err) { width = 0; }
    return width > 0 ? width : node.textContent.length * 7;
  }

  // The width to draw at: the figure's own, so text is drawn at its CSS size (no
  // scaling down on a narrow window; a narrow window gets fewer ticks instead).
  function widthFor(figure) {
    const measured = Math.floor(figure.getBoundingClientRect().width) - 2; // less the border
    return measured > 0 ? Math.max(MIN_W, Math.min(MAX_W, measured)) : W;
  }

  // draw(figure, {title, xLabel, yLabel, series: [{name, points: [[x, y], ...]}],
  //               formatY, formatX, at, fromZero, xRange, smooth, empty}): replaces the
  // figure's content. fromZero: a quantity that is never negative (cores, bytes, rates,
  // durations): its axis starts at 0. at(x): where a latest point is, in words ("14.0 s
  // after start"). xRange: [lo, hi] the x axis covers at least (the whole run, when the
  // series cover only part of it). smooth: each series drawn as its moving average (over
  // 1/SMOOTH_PARTS of the x axis, SMOOTH_POINTS reports at least) over its values as
  // measured (faint); the words and the table keep the measured values.
  function draw(figure, options) {
    const formatY = options.formatY || number;
    const formatX = options.formatX || number;
    const at = options.at || ((x) => `${options.xLabel} ${formatX(x)}`);
    const series = (options.series || []).map((s) => ({
      ...s, points: s.points.filter(([x, y]) => isFinite(x) && y !== null && isFinite(y)),
    })).filter((s) => s.points.length);
    const width = widthFor(figure);
    figure.replaceChildren();
    figure.dataset.drawnWidth = String(width);
    const caption = html("figcaption", options.title, figure);
    caption.id = figure.id + "-title";
    if (!series.length) {
      html("p", options.empty || "No data yet.", figure).className = "chart-empty";
      return;
    }
    const height = width < 400 ? H - 30 : H;
    let xs = [], ys = [];
    for (const s of series) for (const [x, y] of s.points) { xs.push(x); ys.push(y); }
    let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
    if (options.xRange) { x0 = Math.min(x0, options.xRange[0]); x1 = Math.max(x1, options.xRange[1]); }
    const window = options.smooth ? Math.max((x1 - x0) / SMOOTH_PARTS, SMOOTH_POINTS * spacing(series)) : 0;
    if (window) for (const s of series) for (const [x, y] of (s.smoothed = smooth(s.points, window))) ys.push(y);
    let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
    if (options.fromZero) y0 = Math.min(0, y0);
    else if (y0 > 0 && y0 < (y1 - y0) * 0.5) y0 = 0; // near zero: start at zero
    if (x1 === x0) x1 = x0 + 1;
    if (y1 === y0) { // a flat series: a range around it (from 0 to 1 when all are 0)
      if (y0 === 0) y1 = 1;
      else { const pad = Math.abs(y0) * 0.1; y1 += pad; y0 = options.fromZero ? 0 : y0 - pad; }
    }
    const yTicks = ticks(y0, y1, height < H ? 4 : 5);
    if (yTicks.length > 1 && yTicks[yTicks.length - 1] < y1) { // the top gets a labelled tick
      const step = yTicks[1] - yTicks[0];
      yTicks.push(Number((yTicks[yTicks.length - 1] + step).toPrecision(12)));
    }
    y0 = Math.min(y0, yTicks[0]); y1 = Math.max(y1, yTicks[yTicks.length - 1]);

    const svg = el("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
      "aria-labelledby": caption.id + " " + figure.id + "-last", "data-x0": x0, "data-x1": x1 }, figure);
    // The y ticks' labels first: the widest sets the left margin, and the axis title
    // gets a band of its own left of them (it never overlaps them).
    const yLabels = yTicks.map((t) => {
      const node = el("text", { class: "tick tick-y", "text-anchor": "end" }, svg);
      node.textContent = formatY(t);
      return node;
    });
    const left = TITLE_BAND + Math.ceil(Math.max(...yLabels.map(textWidth))) + TICK_GAP;
    const probe = el("text", { class: "tick" }, svg);
    probe.textContent = formatX(x1);
    const right = Math.max(RIGHT, Math.ceil(textWidth(probe) / 2) + 2);
    probe.remove();
    const xTicks = ticks(x0, x1, Math.max(2, Math.min(6, Math.floor((width - left - right) / 70))));
    const sx = (x) => left + ((x - x0) / (x1 - x0)) * (width - left - right);
    const sy = (y) => height - BOTTOM - ((y - y0) / (y1 - y0)) * (height - TOP - BOTTOM);

    yTicks.forEach((t, k) => {
      const y = sy(t);
      svg.insertBefore(el("line", { class: "grid", x1: left, x2: width - right, y1: y, y2: y }), svg.firstChild);
      yLabels[k].setAttribute("x", left - TICK_GAP);
      yLabels[k].setAttribute("y", y + 4);
    });
    for (const t of xTicks) {
      const x = sx(t);
      el("line", { class: "axis", x1: x, x2: x, y1: height - BOTTOM, y2: height - BOTTOM + 4 }, svg);
      el("text", { class: "tick tick-x", x, y: height - BOTTOM + 17, "text-anchor": "middle" }, svg)
        .textContent = formatX(t);
    }
    el("line", { class: "axis", x1: left, x2: left, y1: TOP, y2: height - BOTTOM }, svg);
    el("line", { class: "axis", x1: left, x2: width - right, y1: height - BOTTOM, y2: height - BOTTOM }, svg);
    el("text", { x: (left + width - right) / 2, y: height - 5, "text-anchor": "middle", class: "axis-label axis-x" }, svg)
      .textContent = options.xLabel;
    el("text", { x: -(TOP + height - BOTTOM) / 2, y: 13, transform: "rotate(-90)", "text-anchor": "middle", class: "axis-label axis-y" }, svg)
      .textContent = options.yLabel;

    series.forEach((s, i) => {
      const color = COLORS[i % COLORS.length], dash = DASHES[i % DASHES.length];
      const shape = MARKERS[i % MARKERS.length];
      const path = (points) => points.map(([x, y], k) => `${k ? "L" : "M"}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join("");
      if (s.smoothed) el("path", { class: "raw", d: path(thin(s.points)), stroke: color, "data-series": s.name }, svg);
      const drawn = thin(s.smoothed || s.points);
      const attrs = { class: "series", d: path(drawn), stroke: color, "data-series": s.name, "data-points": s.points.length };
      if (s.smoothed) attrs["data-window"] = window;
      if (dash) attrs["stroke-dasharray"] = dash;
      el("path", attrs, svg);
      const every = Math.max(1, Math.ceil(drawn.length / MARKS_PER_SERIES));
      drawn.forEach(([x, y], k) => {
        if (k % every === 0 || k === drawn.length - 1) marker(shape, sx(x), sy(y), color, svg);
      });
      s.style = { color, dash, shape };
    });

    const legend = html("ul", undefined, figure);
    legend.className = "chart-legend";
    legend.setAttribute("aria-label", "Legend");
    for (const s of series) {
      const item = html("li", undefined, legend);
      const swatch = el("svg", { width: 34, height: 12, viewBox: "0 0 34 12", "aria-hidden": "true" }, item);
      const line = { x1: 1, x2: 33, y1: 6, y2: 6, stroke: s.style.color, "stroke-width": 2 };
      if (s.style.dash) line["stroke-dasharray"] = s.style.dash;
      el("line", line, swatch);
      marker(s.style.shape, 17, 6, s.style.color, swatch);
      html("span", s.name, item);
    }

    const last = series.map((s) => {
      const [x, y] = s.points[s.points.length - 1];
      return `${s.name}: ${formatY(y)} at ${at(x)}`;
    });
    const over = `${number(window)}${options.xUnit ? " " + options.xUnit : ""}`;
    const smoothed = window ? ` Lines: averages over ${over}; faint lines: each value as measured.` : "";
    const words = html("p", "Latest: " + last.join("; ") + "." + smoothed, figure);
    words.className = "chart-last";
    words.id = figure.id + "-last";

    const details = html("details", undefined, figure);
    html("summary", "Numbers as a table", details);
    const table = html("table", undefined, details);
    const head = html("tr", undefined, html("thead", undefined, table));
    for (const label of ["Series", "Points", "First", "Lowest", "Highest", "Latest"]) {
      const th = html("th", label, head); th.scope = "col";
    }
    const body = html("tbody", undefined, table);
    for (const s of series) {
      const values = s.points.map(([, y]) => y);
      const row = html("tr", undefined, body);
      const th = html("th", s.name, row); th.scope = "row";
      for (const cell of [String(values.length), formatY(values[0]), formatY(Math.min(...values)),
        formatY(Math.max(...values)), formatY(values[values.length - 1])]) {
        html("td", cell, row).className = "num";
      }
    }
  }

  return { draw, number, smooth };
})();
