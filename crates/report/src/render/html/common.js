// What both of memprof's pages use (the run's report, page.js; the merged ranks, merged.js):
// a failure to draw said on the page, the palette, element and SVG builders, bytes written as
// the terminal writes them, tables, the category split, and the light / dark theme. Loaded
// first, in the same <script> element.
"use strict";
// A failure to draw says so on the page (and the terminal's report, at the bottom, stays).
window.addEventListener("error", function (e) {
  var p = document.createElement("p");
  p.className = "warn";
  p.textContent = "This page could not draw everything: " + e.message;
  document.body.insertBefore(p, document.body.firstChild);
});

var SVG = "http://www.w3.org/2000/svg";
var CATEGORY_ORDER = ["parameters", "buffers", "gradients", "optimizer_state", "activations",
  "autograd_temporaries", "temporaries", "inputs", "cuda_graph_pool", "workspaces", "other"];
var CATEGORY_COLOR = {
  parameters: "var(--c0)", buffers: "var(--c9)", gradients: "var(--c2)",
  optimizer_state: "var(--c6)", activations: "var(--c1)", autograd_temporaries: "var(--c5)",
  temporaries: "var(--c4)", inputs: "var(--c3)", cuda_graph_pool: "var(--c8)",
  workspaces: "var(--c10)", other: "var(--c11)", unseen: "var(--unseen)"
};
var SITE_COLORS = ["var(--c0)", "var(--c1)", "var(--c2)", "var(--c3)", "var(--c4)",
  "var(--c5)", "var(--c6)", "var(--c7)", "var(--c8)", "var(--c10)"];

// ---- helpers ------------------------------------------------------------------------------
function el(tag, attrs, children) {
  var e = document.createElement(tag);
  setAttrs(e, attrs);
  append(e, children);
  return e;
}
function svg(tag, attrs, children) {
  var e = document.createElementNS(SVG, tag);
  setAttrs(e, attrs);
  append(e, children);
  return e;
}
function setAttrs(e, attrs) {
  for (var k in attrs || {}) {
    if (attrs[k] === null || attrs[k] === undefined) continue;
    if (k === "text") e.textContent = attrs[k];
    else if (k === "cls") e.setAttribute("class", attrs[k]);
    else if (k.slice(0, 2) === "on") e.addEventListener(k.slice(2), attrs[k]);
    else e.setAttribute(k, attrs[k]);
  }
}
function append(e, children) {
  if (children === null || children === undefined) return;
  if (!Array.isArray(children)) children = [children];
  children.forEach(function (c) {
    if (c === null || c === undefined || c === false) return;
    e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
  });
}
var UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
function bytes(n) {
  if (n === null || n === undefined) return "";
  var a = Math.abs(n);
  if (a < 1024) return n + " B";
  var u = 0;
  while (a >= 1024 && u < UNITS.length - 1) { a /= 1024; u++; }
  return (n < 0 ? "-" : "") + a.toFixed(2) + " " + UNITS[u];
}
function signed(n) { return n > 0 ? "+" + bytes(n) : bytes(n); }
function count(n) { return Number(n).toLocaleString("en-US"); }
function seconds(s) {
  if (s < 1) return (s * 1000).toFixed(1) + " ms";
  if (s < 120) return s.toFixed(3) + " s";
  var m = Math.floor(s / 60);
  return m + " min " + (s - 60 * m).toFixed(1) + " s";
}
function fileName(path) { var i = (path || "").lastIndexOf("/"); return i < 0 ? path : path.slice(i + 1); }
function placeLabel(p) {
  if (!p) return "";
  return p.file ? fileName(p.file) + ":" + p.line + " " + p.function : p.function;
}
function siteLabel(s) { return placeLabel(s) + (s.compiled ? " [compiled]" : ""); }
function isLibrary(p) { return !!p && /\/(site|dist)-packages\//.test(p.file || ""); }
function axisUnit(max) {
  var u = 0, d = 1;
  while (max >= d * 1024 && u < UNITS.length - 1) { d *= 1024; u++; }
  return { div: d, name: UNITS[u] };
}
function niceStep(range, ticks) {
  var raw = range / Math.max(ticks, 1);
  var p = Math.pow(10, Math.floor(Math.log10(raw || 1)));
  var m = raw / p;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}
function section(id, title, children) {
  return el("section", { id: id }, [el("h2", { text: title })].concat(children));
}
function table(headers, rows, numeric) {
  var head = el("tr", {}, headers.map(function (h, i) {
    return el("th", { cls: numeric && numeric[i] ? "num" : null, text: h });
  }));
  return el("table", {}, [el("thead", {}, head), el("tbody", {}, rows)]);
}
function td(text, cls, title) {
  // Source text is cut at the cell's width (the whole line on hover), not the page's.
  if (cls === "src") return el("td", { cls: cls }, el("div", { text: text, title: text }));
  return el("td", { cls: cls || null, text: text, title: title || null });
}
// A bar split by category, and its legend: parts are {label, color, bytes}.
function categorySplit(parts, total) {
  parts = parts.filter(function (p) { return p.bytes > 0; });
  return [el("div", { cls: "split" }, parts.map(function (p) {
    return el("span", { title: p.label + ": " + bytes(p.bytes), style: "background: " + p.color + "; width: " + (100 * p.bytes / Math.max(total, 1)) + "%" });
  })), el("div", { cls: "legend" }, parts.map(function (p) {
    return el("span", { cls: "item" }, [el("span", { cls: "sw", style: "background: " + p.color }), p.label + " " + bytes(p.bytes)]);
  }))];
}
// The peak's categories, largest first, as categorySplit takes them.
function peakParts(p) {
  return Object.keys(p.categories || {}).sort(function (a, b) { return p.categories[b] - p.categories[a]; })
    .map(function (c) { return { label: c, color: CATEGORY_COLOR[c] || "var(--c9)", bytes: p.categories[c] }; });
}
function shareBar(part, whole, width) {
  var w = whole > 0 ? Math.max(1, Math.round((width || 80) * part / whole)) : 0;
  return el("span", { cls: "bar", style: "width:" + w + "px" });
}

// ---- theme --------------------------------------------------------------------------------
var root = document.documentElement;
var dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
root.setAttribute("data-theme", dark ? "dark" : "light");
function toggleTheme() {
  root.setAttribute("data-theme", root.getAttribute("data-theme") === "dark" ? "light" : "dark");
}
