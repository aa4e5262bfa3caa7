/* The cluster page: cluster id, controller, brokers (running, paused, partitioned, crashed, stopped; leaders and
 * replicas each holds), every partition's leadership (leader, epoch, replicas, ISR, under-replicated), the
 * broker controls the cluster offers (stop, start, crash, pause, resume, isolate, heal) and its network
 * partitions (cut between sides of brokers, the controller and clients; healed). */
(function () {
  "use strict";
  var h = mk.h;

  function badge(text, kind) { return h("span", {class: "mk-badge " + (kind || "")}, text); }

  var STATES = {running: ["running", "ok"], paused: ["paused", "bad"], partitioned: ["partitioned", "bad"],
                crashed: ["crashed, not yet fenced", "bad"], stopped: ["stopped", "bad"]};

  function brokerState(b) {
    var st = STATES[b.state] || (b.running ? STATES.running : STATES.stopped);
    return badge(b.fenced && !b.running ? st[0] + " (fenced)" : st[0], st[1]);
  }

  // Which control fits which state: start a stopped broker, resume a paused one, heal a partitioned one ...
  function offered(b, a) {
    if (a === "start") return !b.running;
    if (a === "resume") return b.state === "paused";
    if (a === "heal") return b.state === "partitioned";
    if (a === "pause" || a === "stop") return b.running && b.state !== "paused";  // a paused one can crash
    if (a === "isolate") return b.running && b.state === "running";
    return b.running;  // crash
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
    return actions.filter(function (a) { return offered(b, a); }).map(function (a) {
      var safe = a === "start" || a === "resume" || a === "heal";
      return h("button", {class: safe ? "mk-action" : "mk-action mk-danger", "data-broker": b.id,
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
      {key: "state", label: "state", render: brokerState, sort: function (b) { return b.state; }},
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
    el.appendChild(h("h2", {}, "Network partitions"));
    var network = mk.liveTable(el, [
      {key: "id", label: "id"},
      {key: "sides", label: "links cut between", render: function (p) {
        return p.sides.map(function (s) { return s.join(" "); }).join(" | "); }},
      {key: "heals_in_s", label: "heals in", render: function (p) {
        return p.heals_in_s === null ? "when healed" : p.heals_in_s.toFixed(1) + " s"; }},
      {key: "heal", label: "", render: function (p) {
        return h("button", {class: "mk-action", "data-partition": p.id, type: "button", onclick: function (ev) {
          ev.target.disabled = true;
          cutOrHeal("DELETE", "cluster/network/" + p.id, "network partition " + p.id + " healed");
        }}, "heal"); }}
    ], {id: "network", filter: false});
    var sides = h("input", {id: "partition-sides", type: "text", size: 28, placeholder: "0 | 1 2 controller"});
    var seconds = h("input", {id: "partition-seconds", type: "number", min: "0", step: "any", size: 6,
                              placeholder: "seconds"});
    var form = h("form", {id: "partition-form", class: "mk-card"},
      h("label", {}, "cut links between ", sides), " ",
      h("label", {}, "heal after ", seconds), " ",
      h("button", {class: "mk-action mk-danger", type: "submit"}, "partition"),
      h("span", {class: "mk-muted"}, " nodes: broker ids, controller, clients; sides separated by |"));
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var body = {sides: sides.value.split("|").map(function (side) {
        return side.trim().split(/\s+/).filter(Boolean).map(function (n) { return /^\d+$/.test(n) ? Number(n) : n; });
      })};
      if (seconds.value) body.heal_after_s = Number(seconds.value);
      cutOrHeal("POST", "cluster/network", "links cut", body);
    });
    el.appendChild(form);
    state = {summary: summary, brokers: brokers, partitions: partitions, network: network, form: form};
  }

  async function cutOrHeal(method, path, done, body) {
    try {
      await mk.api(path, body === undefined ? {method: method} : {method: method, body: body});
      mk.toast(done);
    } catch (e) {
      mk.toast(e.message || String(e), true);
    }
    var cur = mk.current();
    if (cur && cur.name === "cluster") await refresh(document.getElementById("page-cluster"));
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
    state.network.set(d.network || []);
    state.form.style.display = d.actions.length ? "" : "none";
  }

  mk.page("cluster", {title: "Cluster", interval: 2000,
    render: async function (el) { state = null; await refresh(el); },
    update: async function (el) { await refresh(el); }});
})();
