/* The analysis report's charts and tables (inlined into report.html with uPlot and tables.js).
 * The charts' data is the JSON in the element #mk-report-data: {charts: [{id, group, title, kind, x, series,
 * ...}]}; each div.mk-chart whose data-chart attribute names a chart becomes a uPlot chart: drag to zoom
 * (the panels of one figure zoom together), double-click to zoom out, the values under the cursor in the
 * legend, a click on a legend entry hides or shows its series.  The charts follow their box's width.
 * Tables: mkTables.enhance, plus a count of the rows a filter matches. */
(function (global) {
  "use strict";
  var uPlot = global.uPlot;
  var DISTR = {linear: 1, log: 3, asinh: 4};

  function fmtNum(v) {
    if (v === null || v === undefined || isNaN(v)) return "-";
    var a = Math.abs(v);
    if (a !== 0 && (a >= 1e15 || a < 1e-3)) return v.toExponential(3);
    if (Number.isInteger(v)) return v.toLocaleString("en-US");
    return v.toLocaleString("en-US", {maximumSignificantDigits: a >= 1000 ? 7 : 4});
  }
  function fmtAxis(v) {
    if (v === null || v === undefined) return "";
    var a = Math.abs(v), units = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
    for (var i = 0; i < units.length; i++) {
      if (a >= units[i][0]) return +(v / units[i][0]).toPrecision(3) + units[i][1];
    }
    return a !== 0 && a < 1e-2 ? v.toExponential(0) : String(+v.toPrecision(3));
  }
  function alpha(color, a) {
    var m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(color);
    if (!m) return color;
    return "rgba(" + parseInt(m[1], 16) + "," + parseInt(m[2], 16) + "," + parseInt(m[3], 16) + "," + a + ")";
  }

  /* Stacked layers: each visible series on top of the visible ones before it (uPlot's stacking demo). */
  function stack(raw, shown) {
    var n = raw[0].length, acc = new Array(n).fill(0), data = [raw[0]], bands = [], below = null;
    for (var s = 1; s < raw.length; s++) {
      if (!shown[s]) { data.push(raw[s]); continue; }
      data.push(raw[s].map(function (v, i) { return (acc[i] += (v || 0)); }));
      if (below !== null) bands.push({series: [s, below]});
      below = s;
    }
    return {data: data, bands: bands};
  }

  function axisSize(labels, font) {
    var longest = labels.reduce(function (m, l) { return Math.max(m, String(l).length); }, 0);
    return Math.min(font * 0.6 * longest + 14, 170);
  }

  function build(el, spec, groupCharts) {
    var kind = spec.kind, cats = spec.categories || [], raw = [spec.x].concat(spec.series.map(function (s) {
      return s.values; }));
    var bars = kind === "bars", stacked = kind === "stacked";
    var stepped = uPlot.paths.stepped({align: 1});
    var series = [{
      label: spec.x_legend || spec.x_label || "x",
      value: function (u, v) { return bars ? (cats[v] === undefined ? "-" : cats[v]) : fmtNum(v); }
    }];
    spec.series.forEach(function (s, i) {
      var opt = {
        label: s.label, stroke: s.color, width: 1.5, spanGaps: !!s.span_gaps,
        points: {show: !!s.points && !bars && !stacked && kind !== "steps", size: 5},
        value: function (u, v, si, idx) {
          return fmtNum(idx === null || idx === undefined ? v : raw[si][idx]);  // stacked: the layer's own
        }
      };
      if (s.dash) opt.dash = [6, 4];
      if (kind === "steps" || stacked) opt.paths = stepped;
      if (stacked) opt.fill = alpha(s.color, 0.75);
      if (bars) {
        var n = spec.series.length;
        opt.paths = uPlot.paths.bars({size: [n > 1 ? 0.4 : 0.7, 80], align: n === 2 ? (i === 0 ? -1 : 1) : 0});
        opt.fill = alpha(s.color, 0.8);
        opt.width = 1;
      }
      series.push(opt);
    });
    var xScale = {time: false, distr: DISTR[spec.x_scale] || 1};
    if (bars) xScale = {time: false, range: [-0.6, cats.length - 0.4]};
    var yScale = {distr: DISTR[spec.y_scale] || 1};
    if (stacked || bars) yScale.range = function (u, min, max) { return [0, max > 0 ? max * 1.05 : 1]; };
    var xAxis = {label: spec.x_label, values: function (u, splits) { return splits.map(fmtAxis); }};
    if (bars) {
      var rotate = cats.some(function (c) { return String(c).length > 6; }) && cats.length > 4;
      xAxis = {
        label: spec.x_label,
        splits: function () { return cats.map(function (c, i) { return i; }); },
        values: function (u, splits) { return splits.map(function (i) { return cats[i] === undefined ? "" : cats[i]; }); },
        rotate: rotate ? -40 : 0,
        size: rotate ? axisSize(cats, 12) * 0.7 + 10 : 40,
        grid: {show: false}
      };
    }
    var yAxis = {label: spec.y_label, size: 64, values: function (u, splits) { return splits.map(fmtAxis); }};
    var state = {shown: series.map(function () { return true; })};
    var data = raw, bands = [];
    if (stacked) {
      var st = stack(raw, state.shown);
      data = st.data;
      bands = st.bands.map(function (b) { return {series: b.series, fill: alpha(spec.series[b.series[0] - 1].color, 0.75)}; });
    }
    var syncing = false;
    var opts = {
      title: spec.title || undefined,
      width: Math.max(200, el.clientWidth),
      height: spec.height || 300,
      series: series,
      bands: bands,
      scales: {x: xScale, y: yScale},
      axes: [xAxis, yAxis],
      legend: {live: true},
      cursor: {drag: {x: true, y: false, setScale: true}, sync: spec.group ? {key: spec.group} : undefined},
      hooks: {
        setScale: [function (u, key) {
          if (key !== "x" || syncing || !groupCharts) return;
          syncing = true;
          groupCharts.forEach(function (o) {
            if (o !== u && o.scales.x.min !== u.scales.x.min) o.setScale("x", {min: u.scales.x.min, max: u.scales.x.max});
          });
          syncing = false;
        }],
        setSeries: [function (u, si) {
          if (!stacked || si === null) return;
          var shown = u.series.map(function (s) { return s.show; });
          var st = stack(raw, shown);
          while (u.bands.length) u.delBand(0);
          st.bands.forEach(function (b) { u.addBand({series: b.series, fill: alpha(spec.series[b.series[0] - 1].color, 0.75)}); });
          u.setData(st.data);
        }]
      }
    };
    var plot = new uPlot(opts, data, el);
    plot.mkSpec = spec;
    return plot;
  }

  function noteFilterCounts(root) {
    root.querySelectorAll("input.mk-filter").forEach(function (box) {
      var table = box.parentNode.querySelector("table.mk-table");
      var count = box.parentNode.parentNode.querySelector(".mk-count");
      if (!table || !count) return;
      box.addEventListener("input", function () {
        var rows = table.tBodies[0] ? table.tBodies[0].rows : [];
        var shown = Array.prototype.filter.call(rows, function (r) { return r.style.display !== "none"; }).length;
        count.textContent = box.value ? shown + " of " + rows.length + " rows match" : "";
      });
    });
  }

  function init() {
    var report = {charts: [], ready: false};
    global.mkReport = report;
    if (global.mkTables) {
      global.mkTables.enhance(document);
      noteFilterCounts(document);
    }
    var node = document.getElementById("mk-report-data");
    var specs = node ? JSON.parse(node.textContent).charts : [];
    var byId = {}, groups = {};
    specs.forEach(function (s) { byId[s.id] = s; });
    document.querySelectorAll("div.mk-chart[data-chart]").forEach(function (el) {
      var spec = byId[el.getAttribute("data-chart")];
      if (!spec) return;
      var g = spec.group ? (groups[spec.group] = groups[spec.group] || []) : null;
      var plot = build(el, spec, g);
      if (g) g.push(plot);
      report.charts.push(plot);
      var width = el.clientWidth;
      if (global.ResizeObserver) {
        new ResizeObserver(function () {
          if (el.clientWidth !== width && el.clientWidth > 0) {
            width = el.clientWidth;
            plot.setSize({width: Math.max(200, width), height: spec.height || 300});
          }
        }).observe(el);
      }
    });
    report.ready = true;
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})(window);
