// memprof's HTML report: draws the report embedded above (the JSON of `memprof run -o
// report.json`) with no library and no network: the timeline (stacked by category or by the top
// sites, zoom by dragging, hover for values, click for what was live then by line), the peak by
// stack (an icicle), and the tables.
(function () {
  "use strict";
  var report = JSON.parse(document.getElementById("memprof-report").textContent);
  var texts = JSON.parse(document.getElementById("memprof-texts").textContent);
  var app = document.getElementById("app");
  var TOP_SITES = 8;

  // ---- header -------------------------------------------------------------------------------
  var meta = report.metadata;
  var peak = report.peak;
  var timeline = report.timeline;
  function header() {
    var script = meta.script ? fileName(meta.script) : "run";
    var device = meta.device.name + (meta.device.index !== null && meta.device.index !== undefined && meta.device.kind === "cuda" ? " (cuda:" + meta.device.index + ")" : "");
    var top = el("header", { cls: "top" }, [
      el("div", {}, [
        el("h1", { text: "memprof · " + script }),
        el("div", { cls: "meta" }, [
          el("div", { cls: "mono", text: commandLine() }),
          el("div", { text: device + " · torch " + meta.torch_version + " · Python " + meta.python_version + " · memprof " + meta.memprof_version + " · " + outcome() })
        ])
      ]),
      el("button", { cls: "theme", id: "theme", text: "light / dark", onclick: toggleTheme })
    ]);
    var cards = el("div", { cls: "cards" });
    if (peak) {
      cards.appendChild(card("peak", "allocated_bytes.all.peak", bytes(peak.allocated_bytes)));
      cards.appendChild(card("", "reserved at the peak", bytes(peak.reserved_bytes)));
      cards.appendChild(card("", "reached", seconds(peak.reached.seconds) + " · allocation " + count(peak.reached.allocation)));
      if (peak.reached.site) cards.appendChild(card("", "by", placeLabel(peak.reached.site) + (peak.reached.in_backward ? " (backward)" : "")));
      if (peak.device && peak.device.kind === "cuda") cards.appendChild(card("", "device memory at the peak", bytes(peak.device.process_bytes)));
      if (peak.device && peak.device.kind === "cpu") cards.appendChild(card("", "resident peak (RSS)", bytes(peak.device.rss_peak_bytes)));
    }
    var links = [["timeline", "Timeline"], ["stack", "Peak by stack"], ["sites", "Peak by site"], ["growing", "Growing"],
      ["device", "Device"], ["functions", "Lines"], ["modules", "Modules"], ["oom", "Out of memory"],
      ["budgets", "Budgets"], ["tensors", "Tensors"], ["children", "Child processes"], ["terminal", "As printed"]];
    var nav = el("nav", { cls: "sections" });
    return [top, cards, nav, links];
  }
  // The command as the user typed it: `memprof`, not the path of the binary that ran it.
  function commandLine() {
    var argv = (meta.command_line || []).slice();
    if (argv.length && /^memprof(-embedded)?$/.test(fileName(argv[0]))) argv[0] = "memprof";
    return argv.join(" ");
  }
  function card(cls, key, value) {
    return el("div", { cls: "card " + cls }, [el("div", { cls: "v", text: value }), el("div", { cls: "k", text: key })]);
  }
  function outcome() {
    var o = meta.outcome;
    if (o.status === "exception") {
      var e = o.exception || "an exception";
      return "raised " + (e.length > 140 ? e.slice(0, 140) + "…" : e);
    }
    if (o.status === "completed" || o.status === "ok") return "exit " + o.exit_code;
    return o.status + (o.exit_code ? " (exit " + o.exit_code + ")" : "");
  }

  // ---- timeline data ------------------------------------------------------------------------
  // A site's identity across the report's records: where it allocated and the line that led there.
  function siteKey(s) {
    return [s.file, s.line, s.function, s.context ? s.context.file + ":" + s.context.line : ""].join("|");
  }
  // The timeline's indices of the growth record's sites.
  function growingSiteIndices(t) {
    var g = report.growth;
    if (!g || !g.sites.length || !t.sites) return [];
    var keys = g.sites.map(siteKey);
    var found = [];
    t.sites.forEach(function (s, i) { if (keys.indexOf(siteKey(s)) >= 0) found.push(i); });
    return found;
  }
  function Series(t) {
    var n = t.allocations.length;
    this.n = n;
    this.t = t;
    // The sites' levels, for the top sites: the highest level each reached.
    var levels = new Float64Array(t.sites ? t.sites.length : 0);
    var highest = new Float64Array(levels.length);
    var total = new Float64Array(n);
    var sum = 0;
    for (var i = 0; i < n; i++) {
      var c = (t.site_changes && t.site_changes[i]) || [];
      for (var j = 0; j + 1 < c.length; j += 2) {
        levels[c[j]] += c[j + 1];
        sum += c[j + 1];
        if (levels[c[j]] > highest[c[j]]) highest[c[j]] = levels[c[j]];
      }
      total[i] = sum;
    }
    var order = [];
    for (var s = 0; s < highest.length; s++) if (highest[s] > 0) order.push(s);
    order.sort(function (a, b) { return highest[b] - highest[a]; });
    // The growing sites have bands of their own whatever their size, before the largest.
    var growing = growingSiteIndices(t);
    this.growing = growing;
    order = growing.concat(order.filter(function (s) { return growing.indexOf(s) < 0; }));
    this.topSites = order.slice(0, Math.max(TOP_SITES, growing.length));
    var top = {}, topSeries = this.topSites.map(function () { return new Float64Array(n); });
    this.topSites.forEach(function (s, k) { top[s] = k; });
    levels.fill(0);
    for (i = 0; i < n; i++) {
      c = (t.site_changes && t.site_changes[i]) || [];
      for (j = 0; j + 1 < c.length; j += 2) levels[c[j]] += c[j + 1];
      for (var k = 0; k < this.topSites.length; k++) topSeries[k][i] = levels[this.topSites[k]];
    }
    var self = this;
    // By category: the categories, then what memprof saw no allocation of.
    var cats = CATEGORY_ORDER.filter(function (c) { return t.categories && t.categories[c]; });
    this.byCategory = cats.map(function (c) {
      return { name: c, label: c, color: CATEGORY_COLOR[c], values: t.categories[c] };
    });
    var named = new Float64Array(n);
    this.byCategory.forEach(function (s) { for (var i = 0; i < n; i++) named[i] += s.values[i]; });
    var unseenCat = new Float64Array(n);
    for (i = 0; i < n; i++) unseenCat[i] = Math.max(0, t.allocated_end[i] - named[i]);
    this.byCategory.push({ name: "unseen", label: "not seen allocated", color: CATEGORY_COLOR.unseen, values: unseenCat });
    // By site: the top sites, the other sites, and what memprof saw no allocation of.
    this.bySite = this.topSites.map(function (s, k) {
      var grows = growing.indexOf(s) >= 0;
      return { name: "site" + s, label: (grows ? "growing: " : "") + siteLabel(t.sites[s]), color: SITE_COLORS[k % SITE_COLORS.length], values: topSeries[k], site: s, growing: grows };
    });
    var rest = new Float64Array(n), unseen = new Float64Array(n);
    for (i = 0; i < n; i++) {
      var topSum = 0;
      for (k = 0; k < topSeries.length; k++) topSum += topSeries[k][i];
      rest[i] = Math.max(0, total[i] - topSum);
      unseen[i] = Math.max(0, t.allocated_end[i] - total[i]);
    }
    this.bySite.push({ name: "others", label: "other sites", color: "var(--c9)", values: rest });
    this.bySite.push({ name: "unseen", label: "not seen allocated", color: CATEGORY_COLOR.unseen, values: unseen });
    var peakValue = -Infinity, peakAt = 0;
    for (i = 0; i < n; i++) if (t.allocated_max[i] > peakValue) { peakValue = t.allocated_max[i]; peakAt = i; }
    this.peakAt = peakAt;
    this.peakValue = peakValue;
    self.levelsAt = function (at) {
      var lv = new Float64Array(levels.length);
      for (var i = 0; i <= at; i++) {
        var c = (t.site_changes && t.site_changes[i]) || [];
        for (var j = 0; j + 1 < c.length; j += 2) lv[c[j]] += c[j + 1];
      }
      return lv;
    };
  }

  // ---- timeline chart -----------------------------------------------------------------------
  var state = { axis: "allocations", stack: "category", from: 0, to: 0, selected: null };
  var data = null;

  function timelineSection() {
    if (!timeline || !timeline.allocations || timeline.allocations.length === 0) {
      return section("timeline", "Timeline", [el("p", { cls: "note", text: "This report has no timeline (written by a memprof before the timeline, or nothing was allocated on the device)." })]);
    }
    data = new Series(timeline);
    state.from = 0;
    state.to = data.n - 1;
    state.selected = data.peakAt;
    var axisGroup = el("span", { cls: "group" }, ["x: ",
      el("button", { id: "axis-allocations", cls: "on", text: "allocation index", onclick: function () { setAxis("allocations"); } }),
      el("button", { id: "axis-seconds", text: "time", onclick: function () { setAxis("seconds"); } })]);
    var stackGroup = el("span", { cls: "group" }, ["stacked by: ",
      el("button", { id: "stack-category", cls: "on", text: "category", onclick: function () { setStack("category"); } }),
      el("button", { id: "stack-site", text: "top sites", onclick: function () { setStack("site"); } })]);
    var zoomGroup = el("span", { cls: "group" }, [
      el("button", { id: "zoom-peak", text: "zoom to the peak", onclick: zoomToPeak }),
      el("button", { id: "zoom-reset", text: "whole run", onclick: function () { zoom(0, data.n - 1); } })]);
    var hint = el("span", { cls: "muted", text: "drag to zoom · hover for values · click for what was live then" });
    var chart = el("div", { cls: "chart", id: "timeline-chart" }, [el("div", { cls: "tooltip", id: "tooltip" })]);
    var t = timeline;
    var note = el("p", { cls: "note", text: count(t.allocations[t.allocations.length - 1]) + " allocations in " + count(data.n) + " points of " + count(t.events_per_point) + " allocator events each. Bands: live bytes at each point's end; line: allocated_bytes.all.current at its highest within the point (the highest is the peak, exact); dashed: reserved_bytes.all.current at its highest." });
    return section("timeline", "Timeline", [el("div", { cls: "controls" }, [axisGroup, stackGroup, zoomGroup, hint]), chart,
      el("div", { cls: "legend", id: "timeline-legend" }), note, el("div", { id: "live" })]);
  }
  function setAxis(a) {
    state.axis = a;
    document.getElementById("axis-seconds").className = a === "seconds" ? "on" : "";
    document.getElementById("axis-allocations").className = a === "allocations" ? "on" : "";
    drawTimeline();
  }
  function setStack(s) {
    state.stack = s;
    document.getElementById("stack-category").className = s === "category" ? "on" : "";
    document.getElementById("stack-site").className = s === "site" ? "on" : "";
    drawTimeline();
  }
  function zoom(a, b) {
    state.from = Math.max(0, Math.min(a, b));
    state.to = Math.min(data.n - 1, Math.max(a, b));
    drawTimeline();
  }
  function zoomToPeak() {
    var span = Math.max(8, Math.round(data.n / 40));
    zoom(data.peakAt - span, data.peakAt + span);
    select(data.peakAt);
  }
  function xValue(i) {
    return state.axis === "seconds" ? timeline.seconds[i] : timeline.allocations[i];
  }
  function markX(m) { return state.axis === "seconds" ? m.seconds : m.allocation; }

  var geometry = null;
  function drawTimeline() {
    var chart = document.getElementById("timeline-chart");
    var old = chart.querySelector("svg");
    if (old) chart.removeChild(old);
    var t = timeline;
    var W = Math.max(600, chart.clientWidth || 1200), H = 340;
    var m = { l: 70, r: 16, t: 22, b: 30 };
    var from = state.from, to = Math.max(state.to, state.from);
    var x0 = from > 0 ? xValue(from - 1) : (state.axis === "seconds" ? Math.min(xValue(0), t.seconds[0]) : 0);
    var x1 = xValue(to);
    if (x1 <= x0) x1 = x0 + 1;
    var ymax = 0;
    for (var i = from; i <= to; i++) ymax = Math.max(ymax, t.allocated_max[i], t.reserved_max[i]);
    ymax = ymax > 0 ? ymax * 1.08 : 1;
    function X(v) { return m.l + (W - m.l - m.r) * (v - x0) / (x1 - x0); }
    function Y(v) { return m.t + (H - m.t - m.b) * (1 - v / ymax); }
    geometry = { X: X, Y: Y, from: from, to: to, m: m, W: W, H: H, x0: x0, x1: x1 };
    var root = svg("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "memory over time" });
    // Grid and axes.
    var unit = axisUnit(ymax);
    var ystep = niceStep(ymax / unit.div, 5) * unit.div;
    var grid = svg("g", { cls: "grid" });
    var labels = svg("g", {});
    for (var v = 0; v <= ymax; v += ystep) {
      grid.appendChild(svg("line", { x1: m.l, x2: W - m.r, y1: Y(v), y2: Y(v) }));
      labels.appendChild(svg("text", { x: m.l - 6, y: Y(v) + 4, "text-anchor": "end", text: (v / unit.div).toFixed(v / unit.div < 10 && ystep / unit.div < 1 ? 1 : 0) + " " + unit.name }));
    }
    var xstep = niceStep(x1 - x0, 8);
    for (var xv = Math.ceil(x0 / xstep) * xstep; xv <= x1; xv += xstep) {
      grid.appendChild(svg("line", { x1: X(xv), x2: X(xv), y1: m.t, y2: H - m.b }));
      labels.appendChild(svg("text", { x: X(xv), y: H - m.b + 16, "text-anchor": "middle", text: state.axis === "seconds" ? seconds(xv) : count(Math.round(xv)) }));
    }
    labels.appendChild(svg("text", { x: W - m.r, y: H - 2, "text-anchor": "end", text: state.axis === "seconds" ? "seconds since memprof started" : "allocation index" }));
    root.appendChild(grid);
    // Targeted calls, shaded.
    var marks = t.marks || [];
    var open = {};
    var calls = svg("g", { id: "calls" });
    marks.forEach(function (mk) {
      if (mk.kind === "call_start") open[mk.function] = mk;
      else if (mk.kind === "call_end" && open[mk.function]) {
        var a = X(markX(open[mk.function])), b = X(markX(mk));
        delete open[mk.function];
        if (b < m.l || a > W - m.r) return;
        a = Math.max(a, m.l); b = Math.min(b, W - m.r);
        calls.appendChild(svg("rect", { x: a, y: m.t, width: Math.max(1, b - a), height: H - m.t - m.b, style: "fill: var(--mark-call)" }, svg("title", { text: mk.function })));
      }
    });
    root.appendChild(calls);
    // The stacked bands.
    var series = state.stack === "category" ? data.byCategory : data.bySite;
    var below = new Float64Array(to - from + 1);
    var bands = svg("g", { id: "bands" });
    series.forEach(function (s) {
      var top = [], bottom = [];
      var any = false;
      for (var i = from; i <= to; i++) {
        var b = below[i - from], v = b + s.values[i];
        if (s.values[i] > 0) any = true;
        top.push(X(xValue(i)).toFixed(1) + "," + Y(v).toFixed(1));
        bottom.push(X(xValue(i)).toFixed(1) + "," + Y(b).toFixed(1));
        below[i - from] = v;
      }
      if (!any) return;
      bands.appendChild(svg("polygon", { cls: "series", "data-series": s.name, points: top.concat(bottom.reverse()).join(" "), style: "fill: " + s.color + "; fill-opacity: 0.85" }, svg("title", { text: s.label })));
    });
    root.appendChild(bands);
    // Reserved and allocated at their highest per point.
    function line(values, attrs) {
      var pts = [];
      for (var i = from; i <= to; i++) pts.push(X(xValue(i)).toFixed(1) + "," + Y(values[i]).toFixed(1));
      return svg("polyline", Object.assign({ points: pts.join(" "), fill: "none" }, attrs));
    }
    root.appendChild(line(t.reserved_max, { id: "reserved-line", style: "stroke: var(--reserved); stroke-width: 1.2; stroke-dasharray: 4 3" }));
    root.appendChild(line(t.allocated_max, { id: "allocated-line", style: "stroke: var(--fg); stroke-width: 1.3" }));
    // Backward passes and optimizer steps along the top.
    var ticks = svg("g", { id: "marks" });
    marks.forEach(function (mk) {
      if (mk.kind !== "backward" && mk.kind !== "step") return;
      var x = X(markX(mk));
      if (x < m.l || x > W - m.r) return;
      var color = mk.kind === "backward" ? "var(--mark-backward)" : "var(--mark-step)";
      var y = mk.kind === "backward" ? 4 : 12;
      ticks.appendChild(svg("line", { x1: x, x2: x, y1: y, y2: y + 8, style: "stroke: " + color + "; stroke-width: 1.5" }));
    });
    root.appendChild(ticks);
    // The peak.
    if (data.peakAt >= from && data.peakAt <= to) {
      var px = X(xValue(data.peakAt)), py = Y(data.peakValue);
      var right = px > W - 200;
      root.appendChild(svg("g", { id: "peak-marker" }, [
        svg("line", { x1: px, x2: px, y1: m.t, y2: H - m.b, style: "stroke: var(--peak); stroke-width: 1.2; stroke-dasharray: 5 3" }),
        svg("circle", { cx: px, cy: py, r: 4, style: "fill: var(--peak)" }),
        svg("text", { x: right ? px - 8 : px + 8, y: Math.max(m.t + 10, py - 6), "text-anchor": right ? "end" : "start", style: "fill: var(--peak); font-weight: 600", text: "peak " + bytes(data.peakValue) })
      ]));
    }
    // The moment chosen.
    if (state.selected !== null && state.selected >= from && state.selected <= to) {
      var sx = X(xValue(state.selected));
      root.appendChild(svg("line", { id: "selected", x1: sx, x2: sx, y1: m.t, y2: H - m.b, style: "stroke: var(--accent); stroke-width: 2" }));
    }
    root.appendChild(labels);
    root.appendChild(svg("line", { cls: "hover-line", x1: 0, x2: 0, y1: m.t, y2: H - m.b, style: "stroke: var(--muted); stroke-width: 1; display: none" }));
    root.appendChild(svg("rect", { cls: "brush", x: 0, y: m.t, width: 0, height: H - m.t - m.b, style: "fill: var(--hover); stroke: var(--accent); display: none" }));
    var overlay = svg("rect", { id: "timeline-overlay", x: m.l, y: m.t, width: W - m.l - m.r, height: H - m.t - m.b, style: "fill: transparent; cursor: crosshair" });
    root.appendChild(overlay);
    chart.appendChild(root);
    interact(root, overlay);
    legend(series, from, to);
  }

  function legend(series, from, to) {
    var box = document.getElementById("timeline-legend");
    box.textContent = "";
    series.forEach(function (s) {
      var max = 0;
      for (var i = from; i <= to; i++) max = Math.max(max, s.values[i]);
      if (max <= 0) return;
      box.appendChild(el("span", { cls: "item", title: s.label }, [el("span", { cls: "sw", style: "background: " + s.color }), s.label + " (up to " + bytes(max) + ")"]));
    });
    box.appendChild(el("span", { cls: "item" }, [el("span", { cls: "sw", style: "background: var(--fg); height: 2px" }), "allocated (highest per point)"]));
    box.appendChild(el("span", { cls: "item" }, [el("span", { cls: "sw", style: "background: var(--reserved); height: 2px" }), "reserved (highest per point)"]));
    [["backward", "background: var(--mark-backward)", "backward pass"],
      ["step", "background: var(--mark-step)", "optimizer step"],
      ["call_start", "background: var(--mark-call); border: 1px solid var(--accent)", "targeted calls"]].forEach(function (k) {
      if ((timeline.marks || []).some(function (m) { return m.kind === k[0]; })) {
        box.appendChild(el("span", { cls: "item" }, [el("span", { cls: "sw", style: k[1] }), k[2]]));
      }
    });
  }

  function firstAtOrAfter(px) {
    var g = geometry, lo = g.from, hi = g.to;
    var v = g.x0 + (px - g.m.l) / (g.W - g.m.l - g.m.r) * (g.x1 - g.x0);
    while (lo < hi) {
      var mid = (lo + hi) >> 1;
      if (xValue(mid) < v) lo = mid + 1; else hi = mid;
    }
    return lo;
  }
  function nearest(px) {
    var g = geometry, at = firstAtOrAfter(px);
    var v = g.x0 + (px - g.m.l) / (g.W - g.m.l - g.m.r) * (g.x1 - g.x0);
    if (at > g.from && Math.abs(xValue(at - 1) - v) < Math.abs(xValue(at) - v)) at--;
    return at;
  }

  function interact(root, overlay) {
    var tip = document.getElementById("tooltip");
    var hover = root.querySelector(".hover-line"), brush = root.querySelector(".brush");
    var start = null;
    function localX(e) {
      var r = root.getBoundingClientRect();
      return (e.clientX - r.left) * (geometry.W / r.width);
    }
    overlay.addEventListener("mousedown", function (e) { start = localX(e); e.preventDefault(); });
    overlay.addEventListener("mousemove", function (e) {
      var x = localX(e);
      var i = nearest(x);
      var hx = geometry.X(xValue(i));
      hover.setAttribute("x1", hx); hover.setAttribute("x2", hx); hover.style.display = "";
      if (start !== null && Math.abs(x - start) > 4) {
        brush.setAttribute("x", Math.min(start, x)); brush.setAttribute("width", Math.abs(x - start)); brush.style.display = "";
      }
      showTip(tip, i, e);
    });
    overlay.addEventListener("mouseleave", function () { hover.style.display = "none"; tip.style.display = "none"; });
    overlay.addEventListener("mouseup", function (e) {
      var x = localX(e);
      if (start !== null && Math.abs(x - start) > 4) {
        // The points that cover the range dragged over: from the one before it to the first
        // at or past its end (a range between two points, in a quiet stretch, shows them).
        var a = Math.max(geometry.from, firstAtOrAfter(Math.min(start, x)) - 1);
        var b = Math.min(geometry.to, firstAtOrAfter(Math.max(start, x)));
        start = null;
        if (b - a >= 1) zoom(a, b);
        return;
      }
      start = null;
      select(nearest(x));
    });
    overlay.addEventListener("dblclick", function () { zoom(0, data.n - 1); });
  }

  function showTip(tip, i, e) {
    var t = timeline;
    tip.textContent = "";
    var series = state.stack === "category" ? data.byCategory : data.bySite;
    var rows = [["time", seconds(t.seconds[i])], ["allocations", count(t.allocations[i])],
      ["allocated (highest)", bytes(t.allocated_max[i])], ["allocated (end)", bytes(t.allocated_end[i])],
      ["reserved (highest)", bytes(t.reserved_max[i])]];
    series.slice().sort(function (a, b) { return b.values[i] - a.values[i]; }).slice(0, 6).forEach(function (s) {
      if (s.values[i] > 0) rows.push([s.label, bytes(s.values[i])]);
    });
    rows.forEach(function (r) { tip.appendChild(el("div", { cls: "row" }, [el("span", { cls: "muted", text: r[0] }), el("span", { text: r[1] })])); });
    var box = document.getElementById("timeline-chart").getBoundingClientRect();
    var left = e.clientX - box.left + 14;
    if (left > box.width - 300) left = e.clientX - box.left - 310;
    tip.style.left = left + "px";
    tip.style.top = Math.max(0, e.clientY - box.top - 10) + "px";
    tip.style.display = "block";
  }

  // What was live at a point's end, by line (at the peak's point: the peak itself, exact).
  function select(i) {
    state.selected = i;
    drawTimeline();
    var t = timeline, box = document.getElementById("live");
    box.textContent = "";
    if (i === data.peakAt && peak && peak.allocated_bytes === data.peakValue) return livePeak(box);
    var levels = data.levelsAt(i);
    var rows = [];
    for (var s = 0; s < levels.length; s++) if (levels[s] > 0) rows.push(s);
    rows.sort(function (a, b) { return levels[b] - levels[a]; });
    var total = t.allocated_end[i];
    var first = i > 0 ? t.allocations[i - 1] + 1 : 1;
    box.appendChild(el("div", { cls: "head" }, [
      el("strong", { text: "Live at " + seconds(t.seconds[i]) + " (allocation " + count(t.allocations[i]) + "): " + bytes(total) }),
      el("span", { cls: "muted", text: " · the end of a point " + (first <= t.allocations[i] ? "covering allocations " + count(first) + "–" + count(t.allocations[i]) : "of frees only, after allocation " + count(t.allocations[i])) + "; within it, allocated reached " + bytes(t.allocated_max[i]) })
    ]));
    append(box, categorySplit(data.byCategory.map(function (c) {
      return { label: c.label, color: c.color, bytes: c.values[i] };
    }), total));
    var shown = rows.slice(0, 40);
    box.appendChild(table(["where", "led there from", "live bytes", "", "source"], shown.map(function (s) {
      var site = t.sites[s];
      return el("tr", {}, [td(siteLabel(site), "where", site.file), td(site.context ? placeLabel(site.context) : ""), td(bytes(levels[s]), "num"),
        el("td", {}, shareBar(levels[s], total, 120)), td(site.source || "", "src")]);
    }), [false, false, true, false, false]));
    if (rows.length > shown.length) box.appendChild(el("p", { cls: "note", text: (rows.length - shown.length) + " more sites hold " + bytes(rows.slice(shown.length).reduce(function (a, s) { return a + levels[s]; }, 0)) }));
  }

  function livePeak(box) {
    var r = peak.reached;
    box.appendChild(el("div", { cls: "head" }, [
      el("strong", { text: "Live at the peak, " + seconds(r.seconds) + " (allocation " + count(r.allocation) + "): " + bytes(peak.allocated_bytes) }),
      el("span", { cls: "muted", text: " · exact: every block live when the allocation that reached it was made" })
    ]));
    append(box, categorySplit(peakParts(peak), peak.allocated_bytes));
    var rows = peak.sites.map(function (s) {
      return el("tr", {}, [td(siteLabel(s), "where", s.file), td(s.context ? placeLabel(s.context) : ""), td(bytes(s.bytes), "num"),
        el("td", {}, shareBar(s.bytes, peak.allocated_bytes, 120)), td(s.source || "", "src")]);
    });
    if (peak.other_sites) rows.push(el("tr", {}, [td(peak.other_sites.sites + " other sites"), td(""), td(bytes(peak.other_sites.bytes), "num"), td(""), td("", "src")]));
    if (peak.unseen_bytes) rows.push(el("tr", {}, [td("not seen allocated"), td(""), td(bytes(peak.unseen_bytes), "num"), td(""), td("", "src")]));
    box.appendChild(table(["where", "led there from", "live bytes", "", "source"], rows, [false, false, true, false, false]));
  }

  // ---- the peak by stack (an icicle) ---------------------------------------------------------
  var icicle = { root: null, focus: null, showLibrary: true };
  function node(name, title, color) { return { name: name, title: title, color: color, bytes: 0, children: [], index: {} }; }
  function child(parent, key, title, color) {
    if (!parent.index[key]) { var c = node(key, title, color); c.parent = parent; parent.index[key] = c; parent.children.push(c); }
    return parent.index[key];
  }
  var palette = ["#8fb3d9", "#f5b971", "#9fd48f", "#f09a9c", "#a9d6d2", "#f2dc86", "#cfa9c7", "#ffc2c8", "#c6a38f", "#b9cfe6"];
  function hashColor(s) { var h = 0; for (var i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0; return palette[Math.abs(h) % palette.length]; }
  function buildIcicle() {
    var r = node("peak " + bytes(peak.allocated_bytes), "allocated_bytes.all.peak", "#c9ced6");
    peak.sites.forEach(function (s) {
      var lib = isLibrary(s) ? s : null;
      var user = lib ? s.context : s;
      var path = [];
      if (user) {
        path.push(["fn:" + user.file + ":" + user.function, fileName(user.file) + " · " + user.function, hashColor(user.file + user.function)]);
        path.push(["line:" + user.file + ":" + user.line, fileName(user.file) + ":" + user.line + "  " + (user.source || ""), hashColor(user.file + user.function)]);
      } else {
        path.push(["fn:(library)", "library code (no frame of the program's)", "#d7dbe2"]);
      }
      if (lib && icicle.showLibrary) path.push(["lib:" + lib.file + ":" + lib.line, fileName(lib.file) + ":" + lib.line + " " + lib.function + (s.compiled ? " [compiled]" : ""), "#dfe3ea"]);
      var parts = s.categories && Object.keys(s.categories).length ? s.categories : { other: s.bytes };
      var at = r;
      path.forEach(function (p) { at = child(at, p[0], p[1], p[2]); at.bytes += s.bytes; });
      Object.keys(parts).forEach(function (c) {
        if (parts[c] <= 0) return;
        var leaf = child(at, "cat:" + c, c, CATEGORY_COLOR[c] || "var(--c9)");
        leaf.bytes += parts[c];
        leaf.category = true;
      });
    });
    if (peak.other_sites) { var o = child(r, "other", peak.other_sites.sites + " other sites", "#d7dbe2"); o.bytes += peak.other_sites.bytes; }
    if (peak.unseen_bytes > 0) { var u = child(r, "unseen", "not seen allocated (before memprof started, or on a thread without its reporter)", "#c9ced6"); u.bytes += peak.unseen_bytes; }
    r.bytes = peak.allocated_bytes;
    icicle.root = r;
    icicle.focus = r;
  }
  function drawIcicle() {
    var box = document.getElementById("icicle");
    box.textContent = "";
    var focus = icicle.focus, W = box.clientWidth || 1200, ROW = 24;
    var depth = 0;
    var crumbs = document.getElementById("icicle-crumbs");
    crumbs.textContent = "";
    var chain = [];
    for (var n = focus; n; n = n.parent) chain.unshift(n);
    chain.forEach(function (c, i) {
      if (i > 0) crumbs.appendChild(document.createTextNode(" › "));
      crumbs.appendChild(i < chain.length - 1 ? el("a", { text: c.title.split("  ")[0], onclick: function () { icicle.focus = c; drawIcicle(); } }) : el("strong", { text: c.title.split("  ")[0] }));
    });
    function place(n, x, w, level) {
      if (w < 1) return;
      depth = Math.max(depth, level + 1);
      var share = peak.allocated_bytes > 0 ? (100 * n.bytes / peak.allocated_bytes).toFixed(1) + "%" : "";
      var label = (n === icicle.root ? n.name : n.title) + " · " + bytes(n.bytes);
      box.appendChild(el("div", { cls: "node" + (n.category ? " category" : ""), title: label + " (" + share + " of the peak)", "data-bytes": n.bytes,
        style: "left:" + x + "px;top:" + level * ROW + "px;width:" + Math.max(0, w - 1) + "px;background:" + n.color,
        text: w > 40 ? label : "", onclick: function () { icicle.focus = n.children.length ? n : (n.parent || n); drawIcicle(); } }));
      var cx = x;
      n.children.slice().sort(function (a, b) { return b.bytes - a.bytes; }).forEach(function (c) {
        var cw = n.bytes > 0 ? w * c.bytes / n.bytes : 0;
        place(c, cx, cw, level + 1);
        cx += cw;
      });
    }
    place(focus, 0, W, 0);
    box.style.height = depth * ROW + 2 + "px";
  }
  function stackSection() {
    if (!peak) return null;
    buildIcicle();
    return section("stack", "Peak by stack", [
      el("div", { cls: "controls" }, [
        el("label", {}, [el("input", { type: "checkbox", id: "show-library", checked: "checked", onchange: function (e) { icicle.showLibrary = e.target.checked; buildIcicle(); drawIcicle(); } }), " library frames"]),
        el("span", { cls: "muted", text: "the live bytes at the peak, from the program's function and line down to the library line that allocated and the category; click to zoom" })]),
      el("div", { cls: "crumbs", id: "icicle-crumbs" }),
      el("div", { cls: "icicle", id: "icicle" })]);
  }

  // ---- the tables ---------------------------------------------------------------------------
  function categoriesText(c) {
    return Object.keys(c || {}).filter(function (k) { return c[k] > 0; }).sort(function (a, b) { return c[b] - c[a]; })
      .map(function (k) { return k + " " + bytes(c[k]); }).join(", ");
  }
  function peakTable(p, id) {
    var rows = p.sites.map(function (s, i) {
      return el("tr", {}, [td(String(i + 1), "num"), td(siteLabel(s), "where", s.file), td(s.context ? placeLabel(s.context) : ""),
        td(bytes(s.bytes), "num"), td(s.share.toFixed(1) + "%", "num"), el("td", {}, shareBar(s.bytes, p.allocated_bytes, 100)),
        td(categoriesText(s.categories)), td(s.source || "", "src")]);
    });
    if (p.other_sites) rows.push(el("tr", {}, [td(""), td(p.other_sites.sites + " other sites"), td(""), td(bytes(p.other_sites.bytes), "num"), td(""), td(""), td(""), td("")]));
    if (p.unseen_bytes) rows.push(el("tr", {}, [td(""), td("not seen allocated"), td(""), td(bytes(p.unseen_bytes), "num"), td(""), td(""), td(""), td("")]));
    var t = table(["#", "where", "led there from", "live bytes", "share", "", "categories", "source"], rows, [true, false, false, true, true, false, false, false]);
    t.id = id;
    return t;
  }
  function sitesSection() {
    if (!peak) return null;
    var split = categorySplit(peakParts(peak), peak.allocated_bytes);
    var r = peak.reached;
    var reached = el("p", { cls: "note", text: "Reached at " + seconds(r.seconds) + ", allocation " + count(r.allocation) + (r.site ? ", by " + placeLabel(r.site) + (r.context ? " (from " + placeLabel(r.context) + ")" : "") : "") + (r.in_backward ? ", in a backward pass" : "") + "." });
    var next = peak.next_targets && peak.next_targets.length ? el("p", { cls: "note" }, ["Next: ", el("code", { text: "memprof run " + peak.next_targets.map(function (t) { return "-f " + t; }).join(" ") + " ..." })]) : null;
    return section("sites", "Peak by site", [split[0], split[1], reached, peakTable(peak, "peak-sites"), next]);
  }
  function growingSection() {
    var g = report.growth;
    if (!g || !g.sites.length) return null;
    var rows = g.sites.map(function (s) {
      var cat = Object.keys(s.categories || {}).sort(function (a, b) { return s.categories[b] - s.categories[a]; })[0] || "";
      return el("tr", { cls: "growing" }, [
        td((s.least_bytes === s.most_bytes ? "" : "~") + signed(s.bytes_per_step), "num"), td(count(s.steps), "num"), td(bytes(s.grown_bytes), "num"),
        td(bytes(s.live_bytes), "num"), td(cat.replace(/_/g, " ")), td(siteLabel(s), "where"),
        td(s.context ? placeLabel(s.context) : "", "where"), td(s.source || "", "src")]);
    });
    return section("growing", "Growing", [
      el("p", { cls: "note", text: g.sites.length + " site" + (g.sites.length === 1 ? "" : "s") + " whose live bytes rose at each " + g.step + " for the last " + g.min_steps + " or more (" + count(g.steps) + " so far). In the timeline stacked by site, their bands are marked \u201cgrowing\u201d." }),
      table(["per step", "steps", "grown", "live now", "category", "where", "led there from", "source"], rows, [true, true, true, true, false, false, false, false])
    ]);
  }
  function deviceSection() {
    var d = peak && peak.device;
    if (!d) return null;
    var rows;
    if (d.kind === "cuda") {
      rows = [["the process's device memory", d.process_bytes, "the driver's count (" + d.driver_source + ") less the reservation's change since the peak"],
        ["  CUDA context", d.context_bytes, "before the allocator's first block"],
        ["  outside the allocator", d.outside_allocator_bytes, "cuBLAS/cuDNN/NCCL workspaces, kernels loaded later"],
        ["  reserved_bytes", d.reserved_bytes, "the caching allocator's segments"],
        ["    allocated_bytes", d.allocated_bytes, "the peak: the categories split it"],
        ["    cached", d.cached_bytes, "free blocks kept, free pieces of split segments"],
        ["inactive_split_bytes.all.peak", d.inactive_split_peak_bytes, "fragmentation's high-water mark"],
        ["reserved at the end", d.reserved_bytes_at_end, ""]];
    } else {
      rows = [["resident peak (VmHWM)", d.rss_peak_bytes, "the process"], ["  tensors at the peak", d.tensor_bytes, "allocated_bytes.all.peak"],
        ["  the rest", d.other_bytes, "the interpreter, libraries, the C allocator"]];
    }
    return section("device", "Device at the peak", [table(["", "bytes", ""], rows.map(function (r) {
      return el("tr", {}, [td(r[0], "mono"), td(bytes(r[1]), "num"), td(r[2], "muted")]);
    }), [false, true, false])]);
  }
  function functionsSection() {
    if (!report.functions || !report.functions.length) return null;
    var stats = meta.stats || [];
    var blocks = [];
    // The lines a budget (--max) marked, by function and line.
    var over = {};
    (report.budgets || []).forEach(function (b) {
      (b.exceeded || []).forEach(function (x) { over[x.function + ":" + x.line] = (over[x.function + ":" + x.line] || []).concat([b.spec]); });
    });
    report.functions.forEach(function (f) {
      blocks.push(el("h3", { text: f.qualname + " · " + fileName(f.file) + ":" + f.first_line + " · " + count(f.calls) + " call" + (f.calls === 1 ? "" : "s") }));
      var hot = null, hotValue = -Infinity, key = stats.length ? stats[0].key : null;
      f.lines.forEach(function (l) { var v = key ? (l.stats || {})[key] : l.delta_bytes; if (l.hits > 0 && v !== undefined && v > hotValue) { hotValue = v; hot = l.line; } });
      var rows = f.lines.map(function (l) {
        var cells = [td(String(l.line), "num"), td(l.hits ? count(l.hits) : "", "num"), td(l.hits && l.delta_bytes !== undefined && l.delta_bytes !== null ? signed(l.delta_bytes) : "", "num")];
        stats.forEach(function (s) {
          var v = l.stats ? l.stats[s.key] : undefined;
          cells.push(td(l.hits && v !== undefined ? (s.is_bytes ? bytes(v) : count(v)) : "", "num"));
        });
        cells.push(td(l.source || "", "src"));
        var budgets = over[f.qualname + ":" + l.line];
        var cls = [l.line === hot ? "hot" : "", budgets ? "over" : ""].join(" ").trim();
        return el("tr", { cls: cls || null, title: budgets ? "over budget: " + budgets.join(", ") : null }, cells);
      });
      var t = table(["line", "hits", "Δ"].concat(stats.map(function (s) { return s.key; })).concat(["source"]), rows,
        [true, true, true].concat(stats.map(function () { return true; })).concat([false]));
      t.className = "lines";
      blocks.push(t);
      if (f.peak) {
        blocks.push(el("p", { cls: "note", text: "Peak of its calls: " + bytes(f.peak.allocated_bytes) + " at " + seconds(f.peak.reached.seconds) + (f.peak.reached.site ? ", by " + placeLabel(f.peak.reached.site) : "") }));
        blocks.push(peakTable(Object.assign({}, f.peak, { sites: f.peak.sites.slice(0, 8) }), "peak-" + f.qualname));
      }
    });
    return section("functions", "Lines", blocks);
  }
  function textSection(id, title, text) {
    if (!text) return null;
    return section(id, title, [el("pre", { text: text.replace(/^\n+/, "") })]);
  }
  function warningsSection() {
    if (!report.warnings || !report.warnings.length) return null;
    return section("warnings", "Warnings", report.warnings.map(function (w) { return el("div", { cls: "warn", text: w }); }));
  }

  // ---- the page -----------------------------------------------------------------------------
  var head = header();
  append(app, head.slice(0, 3));
  var sections = [timelineSection(), stackSection(), sitesSection(), growingSection(), deviceSection(), functionsSection(),
    textSection("modules", "Modules", texts.modules), textSection("oom", "Out of memory", texts.oom),
    textSection("budgets", "Budgets", texts.budgets), textSection("tensors", "Tensors", texts.tensors),
    textSection("children", "Child processes", texts.children), warningsSection(),
    section("terminal", "As printed", [el("details", {}, [el("summary", { text: "the report as memprof prints it in a terminal" }), el("pre", { text: texts.terminal })])])];
  append(app, sections);
  var nav = head[2];
  head[3].forEach(function (l) { if (document.getElementById(l[0])) nav.appendChild(el("a", { href: "#" + l[0], text: l[1] })); });
  if (data) { drawTimeline(); select(state.selected); }
  if (icicle.root) drawIcicle();
  // Redrawn when the page's width changes (not its height: a drag under way keeps its chart).
  var resizing = null, drawnWidth = app.clientWidth;
  window.addEventListener("resize", function () {
    clearTimeout(resizing);
    resizing = setTimeout(function () {
      if (app.clientWidth === drawnWidth) return;
      drawnWidth = app.clientWidth;
      if (data) drawTimeline();
      if (icicle.root) drawIcicle();
    }, 100);
  });
  // Printed: the whole run, at the page's width.
  window.addEventListener("beforeprint", function () { if (data) { state.from = 0; state.to = data.n - 1; drawTimeline(); } if (icicle.root) drawIcicle(); });
  document.body.setAttribute("data-ready", "1");
})();
