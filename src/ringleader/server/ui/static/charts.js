// Line charts drawn as SVG by our own code: axes with ticks, axis labels, a legend,
// and a text alternative (the last values in words, a table in <details>).
// Series differ by dash pattern and marker shape, not by colour alone.
// No inline styles (the page's CSP forbids them): sizes are SVG attributes.
"use strict";

const charts = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const W = 560, H = 250, LEFT = 62, RIGHT = 14, TOP = 12, BOTTOM = 40;
  const COLORS = ["#0b5cad", "#b42318", "#1a7f37", "#9a6700", "#6f42c1", "#0e7490", "#c2410c", "#475569"];
  const DASHES = ["", "7 4", "2 3", "10 3 2 3", "4 4", "12 5"];
  const MARKERS = ["circle", "square", "triangle", "diamond", "cross", "triangle-down"];
  const MAX_DRAWN = 600; // points drawn per series (the table keeps the numbers)
  const MARKS_PER_SERIES = 10;

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

  // draw(figure, {title, xLabel, yLabel, series: [{name, points: [[x, y], ...]}],
  //               formatY, formatX, empty, lastX}): replaces the figure's content.
  function draw(figure, options) {
    const formatY = options.formatY || number;
    const formatX = options.formatX || number;
    const series = (options.series || []).map((s) => ({
      ...s, points: s.points.filter(([x, y]) => isFinite(x) && y !== null && isFinite(y)),
    })).filter((s) => s.points.length);
    figure.replaceChildren();
    const caption = html("figcaption", options.title, figure);
    caption.id = figure.id + "-title";
    if (!series.length) {
      html("p", options.empty || "No data yet.", figure).className = "chart-empty";
      return;
    }
    let xs = [], ys = [];
    for (const s of series) for (const [x, y] of s.points) { xs.push(x); ys.push(y); }
    let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
    let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
    if (y0 > 0 && y0 < (y1 - y0) * 0.5) y0 = 0; // near zero: start at zero
    if (x1 === x0) x1 = x0 + 1;
    if (y1 === y0) { y1 = y0 + (Math.abs(y0) || 1) * 0.1; y0 = y0 - (y1 - y0); }
    const yTicks = ticks(y0, y1), xTicks = ticks(x0, x1);
    y0 = Math.min(y0, yTicks[0]); y1 = Math.max(y1, yTicks[yTicks.length - 1]);
    const sx = (x) => LEFT + ((x - x0) / (x1 - x0)) * (W - LEFT - RIGHT);
    const sy = (y) => H - BOTTOM - ((y - y0) / (y1 - y0)) * (H - TOP - BOTTOM);

    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img",
      "aria-labelledby": caption.id + " " + figure.id + "-last" }, figure);
    for (const t of yTicks) {
      const y = sy(t);
      el("line", { class: "grid", x1: LEFT, x2: W - RIGHT, y1: y, y2: y }, svg);
      el("text", { x: LEFT - 6, y: y + 4, "text-anchor": "end" }, svg).textContent = formatY(t);
    }
    for (const t of xTicks) {
      const x = sx(t);
      el("line", { class: "axis", x1: x, x2: x, y1: H - BOTTOM, y2: H - BOTTOM + 4 }, svg);
      el("text", { x, y: H - BOTTOM + 16, "text-anchor": "middle" }, svg).textContent = formatX(t);
    }
    el("line", { class: "axis", x1: LEFT, x2: LEFT, y1: TOP, y2: H - BOTTOM }, svg);
    el("line", { class: "axis", x1: LEFT, x2: W - RIGHT, y1: H - BOTTOM, y2: H - BOTTOM }, svg);
    el("text", { x: (LEFT + W - RIGHT) / 2, y: H - 6, "text-anchor": "middle", class: "axis-label" }, svg)
      .textContent = options.xLabel;
    el("text", { x: -(TOP + H - BOTTOM) / 2, y: 13, transform: "rotate(-90)", "text-anchor": "middle", class: "axis-label" }, svg)
      .textContent = options.yLabel;

    series.forEach((s, i) => {
      const color = COLORS[i % COLORS.length], dash = DASHES[i % DASHES.length];
      const shape = MARKERS[i % MARKERS.length];
      const drawn = thin(s.points);
      const d = drawn.map(([x, y], k) => `${k ? "L" : "M"}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join("");
      const attrs = { class: "series", d, stroke: color, "data-series": s.name, "data-points": s.points.length };
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
      html("span", " " + s.name, item);
    }

    const last = series.map((s) => {
      const [x, y] = s.points[s.points.length - 1];
      return `${s.name} ${formatY(y)} at ${options.xLabel} ${formatX(x)}`;
    });
    const words = html("p", "Latest: " + last.join("; ") + ".", figure);
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

  return { draw, number };
})();
