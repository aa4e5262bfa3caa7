/* minikafka console core: pages, routing, the JSON API, login, element and chart helpers.
 *
 * A page (static/pages/<area>.js) registers itself with
 *   mk.page("topics", {title: "Topics", render: async function (el, args) {...},
 *                      update: async function (el, args) {...}})   // update: optional, called every second
 * and is shown for the hash "#/topics/arg1/arg2" (args = ["arg1", "arg2"]).  The first page registered is
 * the home page.  Helpers: mk.api (JSON calls, throws mk.ApiError), mk.h (elements), mk.table (sortable,
 * filterable tables), mk.chart (a live uPlot time series), mk.form (a small form), mk.toast (a message). */
(function (global) {
  "use strict";
  var pages = {}, order = [], current = null, timer = null, generation = 0;
  var whoami = {auth_required: false, principal: null};

  function ApiError(status, error, message) {
    this.status = status; this.error = error; this.message = message;
  }
  ApiError.prototype = Object.create(Error.prototype);

  /* Call the console API: mk.api("topics"), mk.api("topics", {method: "POST", body: {...}}). */
  async function api(path, opts) {
    opts = opts || {};
    var init = {method: opts.method || "GET", headers: {}, credentials: "same-origin"};
    if (opts.body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(opts.body);
    }
    var resp = await fetch("/console/api/" + path, init);
    var data = null;
    try { data = await resp.json(); } catch (e) { data = null; }
    if (!resp.ok) {
      var err = new ApiError(resp.status, (data && data.error) || "HTTP_" + resp.status,
                             (data && data.message) || resp.statusText);
      if (resp.status === 401) showLogin();
      throw err;
    }
    return data;
  }

  /* mk.h("div", {class: "x", onclick: fn}, "text", child, [more children]) */
  function h(tag, attrs) {
    var el = document.createElement(tag);
    attrs = attrs || {};
    Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (v === null || v === undefined || v === false) return;
      if (k.slice(0, 2) === "on" && typeof v === "function") el.addEventListener(k.slice(2), v);
      else if (k === "class") el.className = v;
      else if (k === "value") el.value = v;
      else el.setAttribute(k, v === true ? "" : v);
    });
    for (var i = 2; i < arguments.length; i++) append(el, arguments[i]);
    return el;
  }
  function append(el, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { append(el, c); }); return; }
    el.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }

  /* A table: columns = [{key, label, render?(row) -> node|text, sort?(row) -> value}], rows = [objects].
   * opts.id sets the table's id; opts.filter=false hides the filter box. */
  function table(columns, rows, opts) {
    opts = opts || {};
    var thead = h("thead", {}, h("tr", {}, columns.map(function (c) { return h("th", {}, c.label || c.key); })));
    var tbody = h("tbody", {}, rows.map(function (r) {
      return h("tr", {}, columns.map(function (c) {
        var v = c.render ? c.render(r) : r[c.key];
        var s = c.sort ? c.sort(r) : (typeof r[c.key] === "number" ? r[c.key] : null);
        return h("td", s === null || s === undefined ? {} : {"data-sort": String(s)}, v);
      }));
    }));
    var t = h("table", {class: "mk-table" + (opts.filter === false ? " mk-nofilter" : ""), id: opts.id || null},
              thead, tbody);
    var wrap = h("div", {class: "mk-table-wrap"}, t);
    global.mkTables.enhance(wrap);
    return wrap;
  }

  /* A live time-series chart: var c = mk.chart(el, {title, series: ["a", "b"], unit: "B/s"});
   * c.push(values) appends one point per series at the current time (keeps the last `points`, default 300);
   * c.setSeries(names) when the set of series changes.  Zoom by dragging, values on hover,
   * series on/off by clicking the legend (uPlot). */
  function chart(el, opts) {
    var points = opts.points || 300, names = [], data = [[]], plot = null;
    var box = h("div", {class: "mk-chart", "data-title": opts.title || ""});
    el.appendChild(box);
    function build() {
      if (plot) plot.destroy();
      var series = [{}].concat(names.map(function (n, i) {
        return {label: n, stroke: palette(i), width: 1.5, value: function (u, v) {
          return v === null || v === undefined ? "-" : fmt(v) + (opts.unit ? " " + opts.unit : ""); }};
      }));
      plot = new global.uPlot({title: opts.title, width: Math.max(320, box.clientWidth || 640),
                               height: opts.height || 220, series: series,
                               scales: {x: {time: true}}, axes: [{}, {size: 70}]}, data, box);
    }
    function setSeries(newNames) {
      if (newNames.join("\u0000") === names.join("\u0000")) return;
      var old = names, oldData = data;
      names = newNames.slice();
      data = [oldData[0]].concat(names.map(function (n) {
        var i = old.indexOf(n);
        return i >= 0 ? oldData[i + 1] : oldData[0].map(function () { return null; });
      }));
      build();
    }
    function push(values, t) {
      if (!Array.isArray(values)) {  // {series: value}
        var obj = values, keys = Object.keys(obj).sort();
        setSeries(names.concat(keys.filter(function (k) { return names.indexOf(k) < 0; })));
        values = names.map(function (n) { return n in obj ? obj[n] : null; });
      }
      data[0].push(t === undefined ? Date.now() / 1000 : t);
      for (var i = 0; i < names.length; i++) data[i + 1].push(values[i] === undefined ? null : values[i]);
      if (data[0].length > points) data.forEach(function (s) { s.shift(); });
      if (!plot) build(); else plot.setData(data);
      box.setAttribute("data-points", String(data[0].length));
    }
    setSeries(opts.series || []);
    if (!plot) build();
    var handle = {push: push, setSeries: setSeries, element: box, data: function () { return data; },
                  plot: function () { return plot; }};
    box.mkChart = handle;  // tests and other pages reach a chart's data through its element
    return handle;
  }
  function palette(i) {
    var c = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
             "#7f7f7f", "#bcbd22"];
    return c[i % c.length];
  }
  function fmt(v) {
    if (typeof v !== "number") return String(v);
    if (Math.abs(v) >= 1e9) return (v / 1e9).toFixed(2) + "G";
    if (Math.abs(v) >= 1e6) return (v / 1e6).toFixed(2) + "M";
    if (Math.abs(v) >= 1e4) return (v / 1e3).toFixed(1) + "k";
    return Number.isInteger(v) ? String(v) : v.toFixed(2);
  }

  /* A form: fields = [{name, label, type?: "text"|"number"|"textarea"|"select"|"checkbox", value?,
   * options?: [values]}]; onsubmit(values) is awaited, its error shown. */
  function form(fields, submitLabel, onsubmit, opts) {
    opts = opts || {};
    var inputs = {};
    var f = h("form", {class: "mk-form", id: opts.id || null}, fields.map(function (fd) {
      var input;
      if (fd.type === "textarea") input = h("textarea", {name: fd.name, rows: fd.rows || 3}, fd.value || "");
      else if (fd.type === "select") input = h("select", {name: fd.name}, (fd.options || []).map(function (o) {
        return h("option", {value: o, selected: o === fd.value}, o); }));
      else input = h("input", {name: fd.name, type: fd.type || "text", value: fd.value === undefined ? null : fd.value,
                               checked: fd.type === "checkbox" && fd.value, placeholder: fd.placeholder || null});
      inputs[fd.name] = input;
      return h("label", {}, h("span", {}, fd.label || fd.name), input);
    }), h("button", {type: "submit"}, submitLabel));
    f.addEventListener("submit", async function (ev) {
      ev.preventDefault();
      var values = {};
      Object.keys(inputs).forEach(function (k) {
        var i = inputs[k];
        values[k] = i.type === "checkbox" ? i.checked : i.value;
      });
      try { await onsubmit(values); } catch (e) { toast(e.message || String(e), true); }
    });
    return f;
  }

  function toast(text, isError) {
    var t = document.getElementById("mk-toast");
    t.textContent = text;
    t.className = isError ? "mk-error show" : "show";
    clearTimeout(toast.timer);
    toast.timer = setTimeout(function () { t.className = ""; }, 4000);
  }

  function page(name, def) {
    pages[name] = def;
    order.push(name);
  }

  function parseHash() {
    var parts = (location.hash.replace(/^#\/?/, "") || "").split("/").map(function (p) {
      try { return decodeURIComponent(p); } catch (e) { return p; }  // a malformed hash: show it as typed
    });
    var name = parts[0] && pages[parts[0]] ? parts[0] : order[0];
    return {name: name, args: parts.slice(1).filter(function (a) { return a !== ""; })};
  }

  async function show() {
    var route = parseHash(), def = pages[route.name], my = ++generation;
    clearInterval(timer);
    current = route;
    document.querySelectorAll("#mk-nav a").forEach(function (a) {
      a.classList.toggle("active", a.getAttribute("data-page") === route.name);
    });
    var main = document.getElementById("mk-main");
    main.innerHTML = "";
    var el = h("section", {class: "mk-page", id: "page-" + route.name});
    main.appendChild(el);
    el.appendChild(h("h1", {}, def.title || route.name));
    try {
      await def.render(el, route.args);
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 401)) el.appendChild(h("p", {class: "mk-error"}, e.message || String(e)));
      return;
    }
    if (def.update && my === generation) {
      var busy = false;
      timer = setInterval(async function () {
        if (busy || my !== generation) return;
        busy = true;
        try { await def.update(el, route.args); } catch (e) { /* shown on the next render */ }
        finally { busy = false; }
      }, def.interval || 1000);
    }
  }

  function go(hash) {
    if (location.hash === hash) show(); else location.hash = hash;
  }

  function showLogin() {
    clearInterval(timer);
    var main = document.getElementById("mk-main");
    main.innerHTML = "";
    main.appendChild(h("section", {class: "mk-page", id: "page-login"}, h("h1", {}, "Log in"),
      h("p", {}, "This broker checks SASL credentials and ACLs: log in as a Kafka user."),
      form([{name: "username", label: "User"}, {name: "password", label: "Password", type: "password"}], "Log in",
        async function (v) {
          whoami = await api("login", {method: "POST", body: {username: v.username, password: v.password}});
          renderUser();
          show();
        }, {id: "mk-login"})));
  }

  function renderUser() {
    var u = document.getElementById("mk-user");
    u.innerHTML = "";
    if (whoami.principal) {
      u.appendChild(h("span", {}, whoami.principal + " "));
      u.appendChild(h("button", {class: "mk-link", onclick: async function () {
        await api("logout", {method: "POST"});
        whoami.principal = null;
        renderUser();
        showLogin();
      }}, "log out"));
    }
  }

  async function start() {
    var nav = document.getElementById("mk-nav");
    order.forEach(function (name) {
      nav.appendChild(h("a", {href: "#/" + name, "data-page": name}, pages[name].title || name));
    });
    window.addEventListener("hashchange", show);
    try { whoami = await api("whoami"); } catch (e) { return; /* 401: login shown */ }
    renderUser();
    if (whoami.auth_required && !whoami.principal) { showLogin(); return; }
    show();
  }

  /* A table that is rebuilt when its rows change (pages updated every second) and keeps its filter text,
   * sort order and filter focus: var t = mk.liveTable(el, columns, opts); t.set(rows). */
  function liveTable(el, columns, opts) {
    var box = h("div", {class: "mk-live-table"}), last = null;
    el.appendChild(box);
    function set(rows) {
      var key = JSON.stringify(rows);
      if (key === last) return;
      last = key;
      var oldBox = box.querySelector("input.mk-filter"), text = oldBox ? oldBox.value : "";
      var focused = oldBox && document.activeElement === oldBox, sorted = null;
      box.querySelectorAll("thead th").forEach(function (th, i) {
        var s = th.getAttribute("aria-sort");
        if (s) sorted = {i: i, dir: s};
      });
      box.innerHTML = "";
      var wrap = table(columns, rows, opts);
      box.appendChild(wrap);
      var t = wrap.querySelector("table"), input = wrap.querySelector("input.mk-filter");
      if (sorted) {
        var th = t.tHead.rows[0].cells[sorted.i];
        if (sorted.dir === "descending") th.setAttribute("aria-sort", "ascending");
        global.mkTables.sortBy(t, sorted.i, th);
      }
      if (input && text) { input.value = text; global.mkTables.filter(t, text); }
      if (input && focused) input.focus();
    }
    return {set: set, element: box};
  }

  /* A date and time (ms since the epoch) as local ISO-like text; "-" for none (negative). */
  function fmtTime(ms) {
    if (ms === null || ms === undefined || ms < 0) return "-";
    var d = new Date(ms), p = function (n) { return (n < 10 ? "0" : "") + n; };
    return d.getFullYear() + "-" + p(d.getMonth() + 1) + "-" + p(d.getDate()) + " " + p(d.getHours()) + ":" +
      p(d.getMinutes()) + ":" + p(d.getSeconds());
  }

  global.mk = {api: api, ApiError: ApiError, h: h, table: table, chart: chart, form: form, toast: toast,
               page: page, go: go, start: start, fmt: fmt, whoami: function () { return whoami; },
               current: function () { return current; }, liveTable: liveTable, fmtTime: fmtTime};
})(window);
