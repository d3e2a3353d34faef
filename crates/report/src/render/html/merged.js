// The merged ranks' page: draws the merged report embedded above (`memprof merge --format json`)
// with no library and no network: each rank's peak as a bar, grouped by host, the median and p90
// drawn across, the outliers marked; hover for a rank's numbers, click for its essentials and a
// link to its own report; the outliers, the hosts, the peak's sites across the ranks, and the
// tables as the terminal prints them.
(function () {
  "use strict";
  var merged = JSON.parse(document.getElementById("memprof-report").textContent);
  var texts = JSON.parse(document.getElementById("memprof-texts").textContent);
  var app = document.getElementById("app");
  var meta = merged.metadata;
  var peak = merged.peak;
  var info = {};
  meta.ranks.forEach(function (r, i) { info[r.rank] = { report: r, link: texts.links[i] }; });
  var peakOf = {};
  var outlierOf = {};
  if (peak) {
    peak.ranks.forEach(function (p) { peakOf[p.rank] = p; });
    (peak.outliers || []).forEach(function (o) { outlierOf[o.rank] = o; });
  }
  // The ranks in the chart's order: host by host, each host's ranks ascending.
  var order = [];
  var hostOf = {};
  (meta.hosts || []).forEach(function (h, i) {
    h.ranks.forEach(function (r) { order.push(r); hostOf[r] = i; });
  });
  var selected = null;

  function rankList(ranks) {
    var parts = [], i = 0;
    while (i < ranks.length) {
      var j = i;
      while (j + 1 < ranks.length && ranks[j + 1] === ranks[j] + 1) j++;
      parts.push(j === i ? String(ranks[i]) : j === i + 1 ? ranks[i] + ", " + ranks[j] : ranks[i] + "–" + ranks[j]);
      i = j + 1;
    }
    return parts.join(", ");
  }
  var KIND = { far_above: "far above the rest", far_below: "far below the rest", largest: "the largest", smallest: "the smallest" };

  // ---- header -------------------------------------------------------------------------------
  function header() {
    var script = meta.script ? fileName(meta.script) : "run";
    var hosts = (meta.hosts || []).length;
    return [
      el("header", { cls: "top" }, [
        el("div", {}, [
          el("h1", { text: "memprof merge: " + script }),
          el("div", { cls: "meta", id: "merged-meta", text: meta.ranks.length + " of " + meta.world_size + " ranks · " +
            hosts + " host" + (hosts === 1 ? "" : "s") + " · torch " + meta.torch_version + " · memprof " + meta.memprof_version })
        ]),
        el("button", { cls: "theme", id: "theme", text: "light / dark", onclick: toggleTheme })
      ]),
      meta.missing_ranks && meta.missing_ranks.length ? el("p", { cls: "warn", id: "missing",
        text: "No report of rank" + (meta.missing_ranks.length === 1 ? " " : "s ") + rankList(meta.missing_ranks) + " (of " + meta.world_size + ")" }) : null,
      peak ? cards() : null
    ];
  }

  function cards() {
    var d = peak.distribution.allocated_bytes;
    function card(k, v, cls) { return el("div", { cls: "card" + (cls ? " " + cls : "") }, [el("div", { cls: "v", text: v }), el("div", { cls: "k", text: k })]); }
    return el("div", { cls: "cards" }, [
      card("max allocated peak (rank " + d.max_rank + ")", bytes(d.max), "peak"),
      card("p90", bytes(d.p90)),
      card("median", bytes(d.median)),
      card("min (rank " + d.min_rank + ")", bytes(d.min)),
      card("max − min", bytes(d.max - d.min)),
      card("ranks far from the rest", String((peak.outliers || []).filter(function (o) { return o.kind.indexOf("far") === 0; }).length))
    ]);
  }

  // ---- the ranks chart ----------------------------------------------------------------------
  var tooltip = el("div", { cls: "tooltip", id: "tooltip" });
  var panel = el("div", { id: "rank-panel" });

  function chart() {
    var width = Math.max(600, app.clientWidth - 48), height = 280;
    var left = 64, right = 12, top = 22, bottom = 34;
    var plotW = width - left - right, plotH = height - top - bottom;
    var most = 1;
    order.forEach(function (r) {
      var p = peakOf[r];
      if (p) most = Math.max(most, p.allocated_bytes, p.reserved_bytes);
    });
    var unit = axisUnit(most);
    var step = niceStep(most / unit.div, 5) * unit.div;
    var yMax = Math.ceil(most / step) * step;
    function y(v) { return top + plotH - plotH * v / yMax; }
    var slot = plotW / Math.max(order.length, 1);
    var barW = Math.max(slot * 0.8, Math.min(slot, 1));
    var s = svg("svg", { id: "ranks-chart", width: width, height: height, viewBox: "0 0 " + width + " " + height });
    // Host bands, every other host shaded; labels when they fit.
    var start = 0;
    (meta.hosts || []).forEach(function (h, i) {
      var x0 = left + start * slot, w = h.ranks.length * slot;
      if (i % 2 === 1) s.appendChild(svg("rect", { cls: "host-band", x: x0, y: top, width: w, height: plotH, "data-host": h.host }));
      if (meta.hosts.length <= 16 && w > 40) {
        s.appendChild(svg("text", { x: x0 + w / 2, y: height - 8, "text-anchor": "middle", text: h.host }));
      }
      start += h.ranks.length;
    });
    var grid = svg("g", { cls: "grid" });
    for (var v = 0; v <= yMax + 1; v += step) {
      grid.appendChild(svg("line", { x1: left, x2: left + plotW, y1: y(v), y2: y(v) }));
      s.appendChild(svg("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end", text: (v / unit.div).toFixed(v / unit.div < 10 && step / unit.div < 1 ? 1 : 0) + " " + unit.name }));
    }
    s.appendChild(grid);
    var bars = svg("g", { id: "rank-bars" });
    order.forEach(function (r, i) {
      var p = peakOf[r];
      if (!p) return;
      // A rank that stands out is at least 3 px wide, however many ranks share the width.
      var w = outlierOf[r] ? Math.max(barW, 3) : barW;
      var x = left + i * slot + (slot - w) / 2;
      bars.appendChild(svg("rect", { cls: "rank reserved", x: x, y: y(p.reserved_bytes), width: w, height: Math.max(0, y(0) - y(p.reserved_bytes)) }));
      bars.appendChild(svg("rect", {
        cls: "rank" + (outlierOf[r] ? " outlier" : ""), "data-rank": r,
        x: x, y: y(p.allocated_bytes), width: w, height: Math.max(1, y(0) - y(p.allocated_bytes))
      }));
    });
    s.appendChild(bars);
    if (peak) {
      var d = peak.distribution.allocated_bytes;
      s.appendChild(svg("line", { cls: "median", x1: left, x2: left + plotW, y1: y(d.median), y2: y(d.median) }));
      s.appendChild(svg("line", { cls: "p90", x1: left, x2: left + plotW, y1: y(d.p90), y2: y(d.p90) }));
      (peak.outliers || []).slice(0, 12).forEach(function (o) {
        var i = order.indexOf(o.rank);
        if (i < 0) return;
        s.appendChild(svg("text", { cls: "outlier-label", x: left + (i + 0.5) * slot, y: y(o.allocated_bytes) - 5, "text-anchor": "middle", text: "r" + o.rank }));
      });
    }
    s.appendChild(svg("text", { x: left, y: 12, text: "allocated peak per rank (reserved behind), grouped by host" }));
    // One mouse area over the bars: the rank under the pointer.
    var overlay = svg("rect", { id: "ranks-overlay", x: left, y: top, width: plotW, height: plotH, fill: "transparent" });
    function rankAt(e) {
      // The SVG is drawn at `width` units and scaled to its box.
      var box = s.getBoundingClientRect();
      var i = Math.floor(((e.clientX - box.left) * width / box.width - left) / slot);
      return i >= 0 && i < order.length ? order[i] : null;
    }
    overlay.addEventListener("mousemove", function (e) {
      var r = rankAt(e);
      if (r === null) { tooltip.style.display = "none"; return; }
      var p = peakOf[r], rep = info[r].report;
      tooltip.textContent = "";
      append(tooltip, [
        el("div", { text: "rank " + r + " (local " + rep.local_rank + ") on " + rep.host }),
        el("div", { cls: "row" }, [el("span", { text: "allocated" }), el("span", { text: p ? bytes(p.allocated_bytes) : "no peak" })]),
        p ? el("div", { cls: "row" }, [el("span", { text: "reserved" }), el("span", { text: bytes(p.reserved_bytes) })]) : null,
        outlierOf[r] ? el("div", { text: KIND[outlierOf[r].kind] }) : null
      ]);
      var box = wrap.getBoundingClientRect();
      tooltip.style.left = (e.clientX - box.left + 12) + "px";
      tooltip.style.top = (e.clientY - box.top + 12) + "px";
      tooltip.style.display = "block";
    });
    overlay.addEventListener("mouseleave", function () { tooltip.style.display = "none"; });
    overlay.addEventListener("click", function (e) { var r = rankAt(e); if (r !== null) select(r); });
    s.appendChild(overlay);
    var wrap = el("div", { cls: "chart" }, [s, tooltip]);
    return wrap;
  }

  function legend() {
    return el("div", { cls: "legend" }, [
      el("span", { cls: "item" }, [el("span", { cls: "sw", style: "background: var(--accent)" }), "allocated peak"]),
      el("span", { cls: "item" }, [el("span", { cls: "sw", style: "background: var(--reserved); opacity: 0.4" }), "reserved peak"]),
      el("span", { cls: "item" }, [el("span", { cls: "sw", style: "background: var(--peak)" }), "rank that stands out"]),
      el("span", { cls: "item" }, [el("span", { cls: "sw", style: "background: var(--mark-step)" }), "median"]),
      el("span", { cls: "item" }, [el("span", { cls: "sw", style: "background: var(--mark-backward)" }), "p90"])
    ]);
  }

  // A rank's essentials in the panel, its bar marked.
  function select(r) {
    selected = r;
    document.querySelectorAll("#rank-bars rect.selected").forEach(function (b) { b.classList.remove("selected"); });
    var bar = document.querySelector('#rank-bars rect[data-rank="' + r + '"]');
    if (bar) bar.classList.add("selected");
    var rep = info[r].report, p = peakOf[r], o = outlierOf[r];
    panel.textContent = "";
    panel.setAttribute("data-rank", r);
    append(panel, [
      el("div", { cls: "title", text: "rank " + r + " (local " + rep.local_rank + ") on " + rep.host + " · " + rep.device + " · " + rep.outcome }),
      p ? el("div", { text: "peak " + bytes(p.allocated_bytes) + " allocated, " + bytes(p.reserved_bytes) + " reserved, reached " +
        (p.in_backward ? "in the backward run by " : "at ") + (p.reached || "(no Python frame)") +
        (peak ? " · " + signed(p.allocated_bytes - peak.distribution.allocated_bytes.median) + " from the median" : "") +
        (o ? " · " + KIND[o.kind] : "") }) : el("div", { text: "no peak: its report has none (it measured no allocation on its device)" }),
    ].concat(p && p.categories ? categorySplit(peakParts(p), p.allocated_bytes) : [], [
      el("div", {}, ["its report: ", el("a", { href: info[r].link, id: "rank-link", text: info[r].link })])
    ]));
  }

  function ranksSection() {
    if (!peak) return section("ranks", "Ranks", [el("p", { cls: "note", text: "No rank's report has a peak (none measured an allocation on its device)." }), panel]);
    return section("ranks", "Ranks", [chart(), legend(), panel]);
  }

  function clickable(r, cells) {
    return el("tr", { cls: "rank-row", "data-rank": r, onclick: function () { select(r); panel.scrollIntoView({ block: "nearest" }); } }, cells);
  }

  function outliersSection() {
    var list = (peak && peak.outliers) || [];
    if (!list.length) return null;
    return section("outliers", "Ranks that stand out", [table(["Rank", "Host", "Allocated peak", "From the median", ""],
      list.map(function (o) {
        return clickable(o.rank, [td(String(o.rank), "num"), td(o.host), td(bytes(o.allocated_bytes), "num"), td(signed(o.from_median_bytes), "num"), td(KIND[o.kind])]);
      }), [true, false, true, true, false])]);
  }

  function hostsSection() {
    var hosts = meta.hosts || [];
    if (hosts.length < 2 || !peak) return null;
    var rows = hosts.map(function (h) {
      var values = h.ranks.filter(function (r) { return peakOf[r]; }).map(function (r) { return [peakOf[r].allocated_bytes, r]; });
      values.sort(function (a, b) { return a[0] - b[0] || a[1] - b[1]; });
      if (!values.length) return null;
      var max = values[values.length - 1][0];
      var maxRank = values.filter(function (v) { return v[0] === max; })[0][1];
      return { host: h, max: max, maxRank: maxRank, median: values[Math.floor((values.length - 1) / 2)][0], min: values[0][0] };
    }).filter(Boolean);
    rows.sort(function (a, b) { return b.max - a.max; });
    return section("hosts", "Hosts by their ranks' peaks", [table(["Host", "Ranks", "max (rank)", "median", "min"],
      rows.map(function (h) {
        return clickable(h.maxRank, [td(h.host.host), td(rankList(h.host.ranks)), td(bytes(h.max) + " (r" + h.maxRank + ")", "num"), td(bytes(h.median), "num"), td(bytes(h.min), "num")]);
      }), [false, false, true, true, true])]);
  }

  function sitesSection() {
    if (!peak || !peak.sites.length) return null;
    return section("merged-sites", "Peak sites over the ranks", [
      el("p", { cls: "note", text: "Each site's bytes at each rank's peak (sites match by file name, line, function and context)." }),
      table(["max (rank)", "median", "min", "Ranks", "Site", "Line Contents"], peak.sites.map(function (s) {
        return clickable(s.bytes.max_rank, [td(bytes(s.bytes.max) + " (r" + s.bytes.max_rank + ")", "num"), td(bytes(s.bytes.median), "num"), td(bytes(s.bytes.min), "num"),
          td(s.ranks === undefined || s.ranks === null ? "all" : String(s.ranks), "num"), td(siteLabel(s), "where"), td(s.source, "src")]);
      }), [true, true, true, true, false, false])
    ]);
  }

  function tablesSection() {
    return section("tables", "As the terminal prints it", [el("pre", { text: texts.terminal })]);
  }

  function warningsSection() {
    if (!merged.warnings.length) return null;
    return section("warnings", "Warnings", merged.warnings.map(function (w) { return el("p", { cls: "warn", text: w }); }));
  }

  // ---- the page -----------------------------------------------------------------------------
  append(app, header());
  append(app, [ranksSection(), outliersSection(), hostsSection(), sitesSection(), warningsSection(), tablesSection()]);
  if (peak) select(peak.distribution.allocated_bytes.max_rank);
  else if (meta.ranks.length) select(meta.ranks[0].rank);
  document.body.dataset.ready = "1";
})();
