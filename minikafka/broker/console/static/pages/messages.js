/* The message browser: #/messages/<topic>.  Pick a partition (or all), seek to the beginning, the end, an
 * offset or a timestamp (ListOffsets), read committed or uncommitted; records shown with key, value and
 * headers as text, JSON or hex.  "Follow live" appends new records every second.  A form produces one
 * record through the broker's Produce path. */
(function () {
  "use strict";
  var h = mk.h;
  var MAX_SHOWN = 1000;
  var state = {topic: null, partition: "all", seek: "beginning", offset: "", timestamp: "", limit: "50",
               isolation: "read_uncommitted", view: "text", follow: false, records: [], next: null, box: null};

  function bytesOf(b64) {
    if (b64 === null || b64 === undefined) return null;
    var s = atob(b64), out = new Uint8Array(s.length);
    for (var i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    return out;
  }
  function text(bytes) { return new TextDecoder("utf-8").decode(bytes); }
  function hex(bytes) {
    var parts = [];
    for (var i = 0; i < bytes.length; i++) {
      parts.push((bytes[i] < 16 ? "0" : "") + bytes[i].toString(16) + ((i % 16 === 15) ? "\n" : " "));
    }
    return parts.join("").trim();
  }
  /* One key, value or header value in the chosen view. */
  function show(b64, cls, inline) {
    var bytes = bytesOf(b64);
    if (inline && bytes !== null) {  // a header value: one line
      return h("span", {class: cls + " mk-mono"}, state.view === "hex" ? hex(bytes).replace(/\n/g, " ") : text(bytes));
    }
    if (bytes === null) return h("span", {class: "mk-muted " + cls}, "null");
    if (state.view === "hex") return h("pre", {class: cls + " mk-hex"}, hex(bytes));
    var t = text(bytes);
    if (state.view === "json") {
      try { return h("pre", {class: cls + " mk-json"}, JSON.stringify(JSON.parse(t), null, 2)); }
      catch (e) { return h("pre", {class: cls, title: "not JSON: shown as text"}, t); }
    }
    return h("pre", {class: cls}, t);
  }

  function renderRecords() {
    if (!state.box) return;
    state.box.innerHTML = "";
    state.box.appendChild(h("p", {class: "mk-muted", id: "records-count"}, state.records.length + " record(s)" +
      (state.follow ? " \u00b7 following" : "")));
    state.box.appendChild(mk.table([
      {key: "partition", label: "partition"},
      {key: "offset", label: "offset"},
      {key: "timestamp", label: "timestamp", render: function (r) {
        return h("span", {title: r.timestamp_type + " " + r.timestamp}, mk.fmtTime ? mk.fmtTime(r.timestamp) :
          new Date(r.timestamp).toISOString()); }},
      {key: "key", label: "key", render: function (r) { return show(r.key, "mk-key"); }, sort: function () { return null; }},
      {key: "value", label: "value", render: function (r) { return show(r.value, "mk-value"); }, sort: function () { return null; }},
      {key: "headers", label: "headers", render: function (r) {
        return r.headers.map(function (hd) { return h("div", {class: "mk-header-entry"}, hd[0] + ": ", show(hd[1], "mk-hval", true)); });
      }}
    ], state.records, {id: "records"}));
  }

  function query(extra) {
    var q = ["partition=" + encodeURIComponent(state.partition), "limit=" + encodeURIComponent(state.limit || "50"),
             "isolation=" + state.isolation];
    return "messages/" + encodeURIComponent(state.topic) + "?" + q.concat(extra).join("&");
  }

  function parseTimestamp(v) {
    v = (v || "").trim();
    if (/^\d+$/.test(v)) return Number(v);
    var t = Date.parse(v);
    if (isNaN(t)) throw new Error("timestamp: milliseconds since the epoch or a date such as 2026-01-31T12:00:00");
    return t;
  }

  /* One request at a time: a load (the form, a seek) starts a new generation, so a follow answer that
   * arrives after it is dropped; a follow never starts while another request is out. */
  var requestGen = 0, pending = false;

  async function load() {
    var extra = ["seek=" + state.seek];
    if (state.seek === "offset") extra.push("offset=" + encodeURIComponent(state.offset || "0"));
    if (state.seek === "timestamp") extra.push("timestamp=" + parseTimestamp(state.timestamp));
    var my = ++requestGen;
    pending = true;
    try {
      var d = await mk.api(query(extra));
      if (my !== requestGen) return;
      state.records = d.records;
      state.next = d.next;
      renderRecords();
    } finally {
      if (my === requestGen) pending = false;
    }
  }

  async function follow() {
    if (!state.follow || !state.topic || pending) return;
    if (!state.next) { state.seek = "end"; await load(); return; }
    var pos = Object.keys(state.next).map(function (p) { return p + ":" + state.next[p]; }).join(",");
    var my = requestGen;
    pending = true;
    try {
      var d = await mk.api(query(["positions=" + pos]));
      if (my !== requestGen) return;  // a load started meanwhile: this answer is for the old position
      Object.keys(d.next).forEach(function (p) { state.next[p] = d.next[p]; });
      if (d.records.length) {
        state.records = state.records.concat(d.records).slice(-MAX_SHOWN);
        renderRecords();
      }
    } finally {
      if (my === requestGen) pending = false;
    }
  }

  function select(id, options, value, onchange) {
    return h("select", {id: id, onchange: onchange}, options.map(function (o) {
      var v = Array.isArray(o) ? o[0] : o, label = Array.isArray(o) ? o[1] : o;
      return h("option", {value: v, selected: String(v) === String(value)}, label);
    }));
  }
  function labelled(label, input) { return h("label", {}, h("span", {}, label), input); }

  async function render(el, args) {
    var topics = (await mk.api("topics")).topics.map(function (t) { return t; });
    var topic = args[0] || (state.topic && topics.some(function (t) { return t.name === state.topic; }) ? state.topic :
                            (topics.length ? topics[0].name : null));
    if (topic !== state.topic) {
      state.records = []; state.next = null; state.partition = "all";
    }
    state.topic = topic;
    state.box = null;
    if (!topic) { el.appendChild(h("p", {class: "mk-muted"}, "No topic you may describe yet.")); return; }
    var info = topics.filter(function (t) { return t.name === topic; })[0];
    var nparts = info ? info.partitions : 0, partitionOptions = [["all", "all"]];
    for (var i = 0; i < nparts; i++) partitionOptions.push([String(i), String(i)]);

    var offsetInput = h("input", {id: "msg-offset", type: "number", min: 0, value: state.offset, placeholder: "0"});
    var tsInput = h("input", {id: "msg-timestamp", value: state.timestamp, placeholder: "ms or 2026-01-31T12:00"});
    var limitInput = h("input", {id: "msg-limit", type: "number", min: 1, max: 500, value: state.limit});
    function seekChanged() {
      offsetInput.parentNode.style.display = state.seek === "offset" ? "" : "none";
      tsInput.parentNode.style.display = state.seek === "timestamp" ? "" : "none";
    }
    var followBox = h("input", {id: "msg-follow", type: "checkbox", checked: state.follow, onchange: async function (ev) {
      state.follow = ev.target.checked;
      if (state.follow) { try { await follow(); } catch (e) { mk.toast(e.message, true); } }
      renderRecords();
    }});
    var controls = h("form", {class: "mk-form", id: "msg-controls", onsubmit: async function (ev) {
      ev.preventDefault();
      state.offset = offsetInput.value; state.timestamp = tsInput.value; state.limit = limitInput.value;
      try { await load(); } catch (e) { mk.toast(e.message || String(e), true); }
    }},
      labelled("Topic", select("msg-topic", topics.map(function (t) { return t.name; }), topic, function (ev) {
        mk.go("#/messages/" + encodeURIComponent(ev.target.value)); })),
      labelled("Partition", select("msg-partition", partitionOptions, state.partition, function (ev) {
        state.partition = ev.target.value; state.next = null; })),
      labelled("Seek", select("msg-seek", [["beginning", "beginning"], ["end", "newest"], ["offset", "offset"],
                                           ["timestamp", "timestamp"]], state.seek, function (ev) {
        state.seek = ev.target.value; seekChanged(); })),
      labelled("Offset", offsetInput),
      labelled("Timestamp", tsInput),
      labelled("Limit", limitInput),
      labelled("Isolation", select("msg-isolation", ["read_uncommitted", "read_committed"], state.isolation,
        function (ev) { state.isolation = ev.target.value; state.next = null; })),
      h("button", {type: "submit", id: "msg-load"}, "Load"),
      labelled("View", select("msg-view", [["text", "text"], ["json", "JSON"], ["hex", "hex"]], state.view,
        function (ev) { state.view = ev.target.value; renderRecords(); })),
      h("label", {class: "mk-inline"}, h("span", {}, "Follow live"), followBox));
    el.appendChild(h("div", {class: "mk-card"}, controls));
    seekChanged();
    state.box = h("div", {id: "records-box"});
    el.appendChild(state.box);
    renderRecords();

    el.appendChild(h("div", {class: "mk-card"}, h("h2", {}, "Produce a record"),
      mk.form([{name: "key", label: "Key (empty: none)"},
               {name: "value", label: "Value", type: "textarea", rows: 3},
               {name: "headers", label: "Headers (name=value per line)", type: "textarea", rows: 2},
               {name: "partition", label: "Partition (empty: partitioner)", type: "number"}], "Produce",
        async function (v) {
          var headers = [];
          (v.headers || "").split("\n").forEach(function (line) {
            if (!line.trim()) return;
            var i = line.indexOf("=");
            if (i <= 0) throw new Error("header: expected name=value, got " + JSON.stringify(line));
            headers.push([line.slice(0, i).trim(), line.slice(i + 1)]);
          });
          var body = {key: v.key === "" ? null : v.key, value: v.value, headers: headers};
          if (v.partition !== "") body.partition = v.partition;
          var r = await mk.api("messages/" + encodeURIComponent(topic), {method: "POST", body: body});
          mk.toast("produced to " + r.topic + "-" + r.partition + " at offset " + r.offset);
          var out = document.getElementById("produce-result");
          if (out) out.textContent = "last: partition " + r.partition + ", offset " + r.offset;
        }, {id: "produce"}),
      h("p", {class: "mk-muted", id: "produce-result"})));
    if (!state.records.length) await load(); else renderRecords();
  }

  mk.page("messages", {title: "Messages", interval: 1000, render: render,
    update: async function () { await follow(); }});
})();
