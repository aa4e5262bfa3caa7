/* The cluster page: cluster id, controller, brokers (running, stopped, fenced; leaders and replicas each
 * holds), every partition's leadership (leader, epoch, replicas, ISR, under-replicated), and the broker
 * controls the cluster offers (stop and start; crash or partition once the cluster can play them). */
(function () {
  "use strict";
  var h = mk.h;

  function badge(text, kind) { return h("span", {class: "mk-badge " + (kind || "")}, text); }

  function brokerState(b) {
    if (b.running) return badge("running", "ok");
    return badge(b.fenced ? "stopped (fenced)" : "stopped", "bad");
  }

  async function act(brokerId, action) {
    try {
      await mk.api("cluster/brokers/" + brokerId + "/" + action, {method: "POST"});
      mk.toast("broker " + brokerId + ": " + action + " done");
    } catch (e) {
      mk.toast(e.message || String(e), true);
    }
    var cur = mk.current();
    if (cur && cur.name === "cluster") await refresh(document.getElementById("page-cluster"));
  }

  function controls(b, actions) {
    return actions.filter(function (a) {
      return a === "start" ? !b.running : b.running;  // stop, crash, partition...: a running broker
    }).map(function (a) {
      return h("button", {class: a === "start" ? "mk-action" : "mk-action mk-danger", "data-broker": b.id,
                          "data-action": a, type: "button", onclick: function (ev) {
        ev.target.disabled = true;
        act(b.id, a);
      }}, a);
    });
  }

  var state = null;

  function build(el) {
    var summary = h("div", {class: "mk-card", id: "cluster-summary"});
    el.appendChild(summary);
    el.appendChild(h("h2", {}, "Brokers"));
    var brokers = mk.liveTable(el, [
      {key: "id", label: "id"},
      {key: "address", label: "address", render: function (b) { return b.host + ":" + b.port; }},
      {key: "state", label: "state", render: brokerState, sort: function (b) { return b.running ? 1 : 0; }},
      {key: "rack", label: "rack", render: function (b) { return b.rack === null ? "-" : b.rack; }},
      {key: "leaders", label: "leader partitions"},
      {key: "replicas", label: "replicas"},
      {key: "controls", label: "controls", render: function (b) { return controls(b, b._actions); }}
    ], {id: "brokers", filter: false});
    el.appendChild(h("h2", {}, "Partitions"));
    var partitions = mk.liveTable(el, [
      {key: "topic", label: "topic", render: function (p) { return h("a", {href: "#/topics/" + encodeURIComponent(p.topic)}, p.topic); },
       sort: function (p) { return p.topic; }},
      {key: "partition", label: "partition"},
      {key: "leader", label: "leader", render: function (p) {
        return p.offline ? badge(p.leader < 0 ? "none" : p.leader + " (down)", "bad") : String(p.leader); },
       sort: function (p) { return p.leader; }},
      {key: "leader_epoch", label: "epoch"},
      {key: "replicas", label: "replicas", render: function (p) { return p.replicas.join(", "); }},
      {key: "isr", label: "ISR", render: function (p) { return p.isr.join(", "); }},
      {key: "under_replicated", label: "under-replicated", render: function (p) {
        return p.under_replicated ? badge("yes", "bad") : badge("no", "ok"); },
       sort: function (p) { return p.under_replicated ? 1 : 0; }}
    ], {id: "partitions"});
    state = {summary: summary, brokers: brokers, partitions: partitions};
  }

  async function refresh(el) {
    if (!el) return;
    var d = await mk.api("cluster");
    if (!state || !el.contains(state.summary)) build(el);
    state.summary.innerHTML = "";
    state.summary.appendChild(h("div", {},
      h("strong", {}, "cluster id "), h("span", {class: "mk-mono", id: "cluster-id"}, d.cluster_id || "-"),
      " \u00b7 ", h("strong", {}, "controller "), h("span", {id: "cluster-controller"}, String(d.controller)),
      " \u00b7 ", d.brokers.filter(function (b) { return b.running; }).length + " of " + d.brokers.length +
      " brokers running",
      d.is_cluster ? "" : h("span", {class: "mk-muted"}, " \u00b7 a lone broker: no broker controls")));
    state.brokers.set(d.brokers.map(function (b) { return Object.assign({_actions: d.actions}, b); }));
    state.partitions.set(d.partitions);
  }

  mk.page("cluster", {title: "Cluster", interval: 2000,
    render: async function (el) { state = null; await refresh(el); },
    update: async function (el) { await refresh(el); }});
})();
