/* The live flow-control page: one snapshot of /console/api/live a second, charted as it comes.
 * Client quotas (rate against quota, throttle time), the fetch-session cache, replication throttling
 * (and the 18-byte empty answers), requests per API (rate, latency percentiles), KIP-714 client metrics.
 * Counts arrive cumulative; rates are their differences between two snapshots. */
(function () {
  "use strict";
  var h = mk.h;
  var state = null;

  function facts(el, pairs) {
    el.innerHTML = "";
    el.appendChild(h("dl", {class: "mk-facts"}, pairs.map(function (kv) {
      return h("div", {}, h("dt", {}, kv[0]), h("dd", {"data-fact": kv[0]}, kv[1] === null || kv[1] === undefined ? "-" : String(kv[1])));
    })));
  }
  function rate(now, prev, key, value) {
    if (!prev || !(key in prev.counts) || now.time_ms <= prev.time_ms) return null;
    return Math.max(0, (value - prev.counts[key]) * 1000 / (now.time_ms - prev.time_ms));
  }
  function child(parent, node) {
    parent.appendChild(node);
    return node;
  }
  function card(el, title, id) { return child(el, h("div", {class: "mk-card", id: id}, h("h2", {}, title))); }
  function none(text, id) { return h("p", {class: "mk-muted mk-none", id: id}, text); }
  function grid(parent) { return child(parent, h("div", {class: "mk-grid"})); }

  function build(el, brokerIds) {
    var s = {broker: brokerIds[0], prev: null, el: el};
    if (brokerIds.length > 1) {
      var sel = h("select", {id: "live-broker", onchange: function () { s.broker = Number(sel.value); reset(); }},
                  brokerIds.map(function (id) { return h("option", {value: id}, "broker " + id); }));
      el.appendChild(h("p", {}, "Broker: ", sel));
    }
    var body = h("div", {id: "live-body"});
    el.appendChild(body);
    function reset() {
      body.innerHTML = "";
      s.prev = null;
      var q = card(body, "Client quotas", "live-quotas");
      s.quotaNone = none("No client has been measured against a quota yet (quotas are set with kafka-configs " +
                         "--alter --entity-type clients/users or the broker's client quota config).", "live-quotas-none");
      q.appendChild(s.quotaNone);
      s.quotaTable = mk.liveTable(q, [
        {key: "type", label: "Quota"}, {key: "user", label: "User"}, {key: "client_id", label: "Client id"},
        {key: "rate", label: "Rate", render: function (r) { return r.rate === null ? "-" : mk.fmt(r.rate) + " " + r.unit; }},
        {key: "quota", label: "Quota", render: function (r) { return r.quota === null ? "none" : mk.fmt(r.quota) + " " + r.unit; }},
        {key: "throttle_time_ms", label: "Throttle time (ms, avg)", render: function (r) { return mk.fmt(r.throttle_time_ms); }}],
        {id: "live-quota-table", filter: false});
      var qgrid = grid(q);
      s.produceChart = mk.chart(qgrid, {title: "Produce byte rate against quota", unit: "B/s"});
      s.fetchChart = mk.chart(qgrid, {title: "Fetch byte rate against quota", unit: "B/s"});
      s.throttleChart = mk.chart(qgrid, {title: "Throttle time (ms)", unit: "ms"});

      var f = card(body, "Fetch sessions", "live-fetch-sessions");
      s.fetchFacts = child(f, h("div", {}));
      var fgrid = grid(f);
      s.fetchKindsChart = mk.chart(fgrid, {title: "Fetch requests per second by session kind", unit: "/s"});
      s.slotsChart = mk.chart(fgrid, {title: "Fetch-session cache slots", series: ["used", "total"]});

      var r = card(body, "Replication throttling", "live-replication");
      s.replFacts = child(r, h("div", {}));
      var rgrid = grid(r);
      s.replChart = mk.chart(rgrid, {title: "Replication byte rate against the throttled rate", unit: "B/s"});
      s.emptyChart = mk.chart(rgrid, {title: "Empty (18-byte) leader answers per second", unit: "/s"});

      var rq = card(body, "Requests", "live-requests");
      s.reqNone = none("No requests yet.", "live-requests-none");
      rq.appendChild(s.reqNone);
      s.reqTable = mk.liveTable(rq, [
        {key: "api", label: "API"}, {key: "per_second", label: "Requests/s", render: function (x) { return x.per_second === null ? "-" : mk.fmt(x.per_second); }},
        {key: "count", label: "Total"},
        {key: "p50", label: "p50 (ms)", render: function (x) { return x.p50 === null ? "-" : mk.fmt(x.p50); }},
        {key: "p99", label: "p99 (ms)", render: function (x) { return x.p99 === null ? "-" : mk.fmt(x.p99); }},
        {key: "p999", label: "p99.9 (ms)", render: function (x) { return x.p999 === null ? "-" : mk.fmt(x.p999); }},
        {key: "max", label: "Max (ms)", render: function (x) { return x.max === null ? "-" : mk.fmt(x.max); }}],
        {id: "live-request-table"});
      var rqgrid = grid(rq);
      s.reqChart = mk.chart(rqgrid, {title: "Requests per second by API", unit: "/s"});
      s.latChart = mk.chart(rqgrid, {title: "p99 latency by API (ms)", unit: "ms"});

      var cm = card(body, "Client metrics (KIP-714)", "live-client-metrics");
      s.cmNone = none("No client has pushed metrics yet (clients push them when a client-metrics subscription " +
                      "matches them: kafka-client-metrics --alter).", "live-client-metrics-none");
      cm.appendChild(s.cmNone);
      s.cmBox = h("div", {});
      cm.appendChild(s.cmBox);
      s.cmKey = null;
    }
    reset();
    return s;
  }

  function update(s, d) {
    var b = d.brokers.filter(function (x) { return x.id === s.broker; })[0] || d.brokers[0];
    if (!b) return;
    var counts = {}, now = {time_ms: d.time_ms, counts: counts}, prev = s.prev;

    // Client quotas.
    s.quotaTable.set(b.quotas);
    s.quotaNone.style.display = b.quotas.length ? "none" : "";
    var produce = {}, fetch = {}, throttle = {};
    b.quotas.forEach(function (q) {
      var who = (q.client_id || "default") + (q.user ? " (" + q.user + ")" : "");  // one series per user and client id
      if (q.type === "Produce" || q.type === "Fetch") {
        var target = q.type === "Produce" ? produce : fetch;
        target[who + " rate"] = q.rate === null ? 0 : q.rate;
        if (q.quota !== null) target[who + " quota"] = q.quota;
      }
      throttle[q.type + " " + who] = q.throttle_time_ms;
    });
    if (Object.keys(produce).length) s.produceChart.push(produce);
    if (Object.keys(fetch).length) s.fetchChart.push(fetch);
    if (Object.keys(throttle).length) s.throttleChart.push(throttle);

    // Fetch sessions.
    var fs = b.fetch_sessions, kinds = {};
    ["full", "incremental", "sessionless", "error"].forEach(function (k) {
      var v = fs.requests[k] || 0;
      counts["fetch." + k] = v;
      var r = rate(now, prev, "fetch." + k, v);
      if (r !== null) kinds[k] = r;
    });
    facts(s.fetchFacts, [["slots used", fs.slots_used + " / " + fs.slots_total], ["partitions cached", fs.partitions_cached],
      ["evictions", fs.evictions], ["full fetches", fs.requests.full || 0], ["incremental fetches", fs.requests.incremental || 0],
      ["sessionless fetches", fs.requests.sessionless || 0], ["session errors", fs.requests.error || 0]]);
    if (Object.keys(kinds).length) s.fetchKindsChart.push(kinds);
    s.slotsChart.push({used: fs.slots_used, total: fs.slots_total});

    // Replication.
    var lead = b.replication.leader, fol = b.replication.follower;
    counts.empty = lead.empty_answers;
    facts(s.replFacts, [["leader rate (B/s)", mk.fmt(lead.rate || 0)], ["leader throttled rate", lead.quota === null ? "unlimited" : mk.fmt(lead.quota)],
      ["follower rate (B/s)", mk.fmt(fol.rate || 0)], ["follower throttled rate", fol.quota === null ? "unlimited" : mk.fmt(fol.quota)],
      ["throttled partitions (leader / follower)", lead.throttled_partitions + " / " + fol.throttled_partitions],
      ["leader records", lead.recorded_count], ["empty 18-byte answers", lead.empty_answers]]);
    var repl = {leader: lead.rate || 0, follower: fol.rate || 0};
    if (lead.quota !== null) repl["leader quota"] = lead.quota;
    if (fol.quota !== null) repl["follower quota"] = fol.quota;
    s.replChart.push(repl);
    var er = rate(now, prev, "empty", lead.empty_answers);
    if (er !== null) s.emptyChart.push({"empty answers": er});

    // Requests.
    var rows = [], perApi = {}, lat = {};
    b.requests.forEach(function (x) {
      counts["req." + x.api] = x.count;
      var r = rate(now, prev, "req." + x.api, x.count), l = x.latency_ms || {};
      rows.push({api: x.api, per_second: r, count: x.count, p50: l["50thPercentile"] === undefined ? null : l["50thPercentile"],
                 p99: l["99thPercentile"] === undefined ? null : l["99thPercentile"],
                 p999: l["999thPercentile"] === undefined ? null : l["999thPercentile"], max: l.Max === undefined ? null : l.Max});
      if (r !== null) perApi[x.api] = r;
      if (l["99thPercentile"] !== undefined) lat[x.api] = l["99thPercentile"];
    });
    s.reqTable.set(rows);
    s.reqNone.style.display = rows.length ? "none" : "";
    if (Object.keys(perApi).length) s.reqChart.push(perApi);
    if (Object.keys(lat).length) s.latChart.push(lat);

    // KIP-714 client metrics.
    s.cmNone.style.display = d.client_metrics.length ? "none" : "";
    var key = JSON.stringify(d.client_metrics);
    if (key !== s.cmKey) {
      s.cmKey = key;
      var open = {};
      s.cmBox.querySelectorAll("details[open]").forEach(function (x) { open[x.getAttribute("data-client")] = true; });
      s.cmBox.innerHTML = "";
      d.client_metrics.forEach(function (c) {
        var names = Object.keys(c.metrics).sort();
        s.cmBox.appendChild(h("details", {"data-client": c.client_instance_id, open: open[c.client_instance_id] || null},
          h("summary", {}, (c.client_id || "(no client id)") + " \u2014 " + c.client_software_name + " " +
            c.client_software_version + " from " + c.client_source_address + ", " + c.pushes + " push(es), last " +
            mk.fmtTime(c.last_push_ms) + ", " + names.length + " series"),
          mk.table([{key: "name", label: "Metric"}, {key: "value", label: "Value", render: function (m) { return mk.fmt(m.value); }}],
                   names.map(function (n) { return {name: n, value: c.metrics[n]}; }))));
      });
    }
    s.prev = now;
  }

  mk.page("live", {
    title: "Live flow control",
    render: async function (el) {
      el.appendChild(h("p", {class: "mk-muted"}, "Measured by the broker when this page asks, once a second; " +
                       "nothing is measured while no one watches."));
      var d = await mk.api("live");
      state = build(el, d.brokers.map(function (b) { return b.id; }));
      update(state, d);
    },
    update: async function () { update(state, await mk.api("live")); }
  });
})();
