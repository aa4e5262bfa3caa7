/* The groups page: classic and KIP-848 consumer groups and share groups (#/groups), one group with its
 * members, offsets, lag per partition over time, offset reset and deletion (#/groups/<id>). */
(function () {
  "use strict";
  var h = mk.h;

  function tpKey(o) { return o.topic + "-" + o.partition; }
  function num(v) { return v === null || v === undefined ? "-" : v; }

  function listColumns() {
    return [
      {key: "group_id", label: "Group", render: function (g) {
        return h("a", {href: "#/groups/" + encodeURIComponent(g.group_id), class: "mk-group-link"}, g.group_id); }},
      {key: "type", label: "Type"}, {key: "protocol_type", label: "Protocol type"},
      {key: "protocol", label: "Protocol / assignor"}, {key: "state", label: "State"},
      {key: "members", label: "Members"},
      {key: "total_lag", label: "Total lag", render: function (g) { return num(g.total_lag); },
       sort: function (g) { return g.total_lag === null ? -1 : g.total_lag; }}];
  }

  async function renderList(el) {
    var empty = h("p", {class: "mk-muted", id: "groups-none"}, "No groups yet: a consumer that joins a group or commits offsets makes one.");
    var card = h("div", {class: "mk-card"});
    el.appendChild(card);
    var t = mk.liveTable(card, listColumns(), {id: "groups-table"});
    card.appendChild(empty);
    async function refresh() {
      var data = await mk.api("groups");
      t.set(data.groups);
      empty.style.display = data.groups.length ? "none" : "";
    }
    await refresh();
    return refresh;
  }

  function offsetColumns() {
    return [
      {key: "topic", label: "Topic"}, {key: "partition", label: "Partition"},
      {key: "committed", label: "Committed", render: function (o) { return num(o.committed); }},
      {key: "log_start_offset", label: "Log start"},
      {key: "high_watermark", label: "High watermark"}, {key: "log_end_offset", label: "Log end"},
      {key: "lag", label: "Lag", render: function (o) {
        return h("span", {class: "mk-lag", "data-tp": tpKey(o)}, num(o.lag)); },
       sort: function (o) { return o.lag === null ? -1 : o.lag; }},
      {key: "member_id", label: "Member", render: function (o) {
        return o.member_id ? h("span", {class: "mk-mono"}, o.member_id + (o.client_id ? " (" + o.client_id + ")" : "")) : "-"; }}];
  }

  function memberColumns() {
    return [
      {key: "member_id", label: "Member id", render: function (m) { return h("span", {class: "mk-mono"}, m.member_id); }},
      {key: "instance_id", label: "Instance id", render: function (m) { return m.instance_id || "-"; }},
      {key: "client_id", label: "Client id"}, {key: "host", label: "Host"}, {key: "epoch", label: "Epoch"},
      {key: "assignment", label: "Assignment", render: function (m) {
        return m.assignment.length ? m.assignment.map(function (tp) { return tp[0] + "-" + tp[1]; }).join(", ") : "-"; },
       sort: function (m) { return m.assignment.length; }}];
  }

  async function renderGroup(el, groupId) {
    var g = await mk.api("groups/" + encodeURIComponent(groupId));
    el.querySelector("h1").textContent = "Group " + groupId;
    el.appendChild(h("p", {}, h("a", {href: "#/groups"}, "\u2190 all groups")));
    var summary = h("div", {class: "mk-card", id: "group-summary"});
    el.appendChild(summary);

    var membersCard = h("div", {class: "mk-card"}, h("h2", {}, "Members"));
    var noMembers = h("p", {class: "mk-muted"}, "No members: the group is empty.");
    el.appendChild(membersCard);
    var members = mk.liveTable(membersCard, memberColumns(), {id: "group-members"});
    membersCard.appendChild(noMembers);

    var offsetsCard = h("div", {class: "mk-card"}, h("h2", {}, g.type === "share" ? "Share-partition start offsets and lag" : "Committed offsets and lag"));
    var noOffsets = h("p", {class: "mk-muted"}, "No offsets committed yet.");
    el.appendChild(offsetsCard);
    var offsets = mk.liveTable(offsetsCard, offsetColumns(), {id: "group-offsets"});
    offsetsCard.appendChild(noOffsets);

    var chartCard = h("div", {class: "mk-card"});
    el.appendChild(chartCard);
    var chart = mk.chart(chartCard, {title: "Lag per partition (records)", unit: "records"});

    var actions = h("div", {class: "mk-card", id: "group-actions"}, h("h2", {}, "Reset offsets"),
      h("p", {class: "mk-muted"}, "As kafka-consumer-groups --reset-offsets: only while the group has no members. " +
        "Without a topic, every partition with an offset is reset."));
    el.appendChild(actions);
    var resetForm = mk.form([
      {name: "to", label: "To", type: "select", options: ["earliest", "latest", "timestamp", "offset"], value: "earliest"},
      {name: "value", label: "Offset, or timestamp (ms or date)", placeholder: "for offset / timestamp"},
      {name: "topic", label: "Topic (optional)"}], "Reset offsets", async function (v) {
        var body = {to: v.to};
        if (v.topic) body.topic = v.topic;
        if (v.to === "offset") body.value = Number(v.value);
        if (v.to === "timestamp") body.value = /^\d+$/.test(v.value) ? Number(v.value) : Date.parse(v.value);
        var r = await mk.api("groups/" + encodeURIComponent(groupId) + "/reset-offsets", {method: "POST", body: body});
        mk.toast("reset " + r.reset.length + " partition(s)");
        await refresh();
      }, {id: "group-reset"});
    actions.appendChild(resetForm);
    var notEmpty = h("p", {class: "mk-error", id: "group-not-empty"}, "The group has members: stop them to reset its offsets or delete it.");
    actions.appendChild(notEmpty);
    actions.appendChild(h("h2", {}, "Delete group"));
    actions.appendChild(h("button", {class: "mk-danger", id: "group-delete", onclick: async function () {
      if (!window.confirm("Delete group " + groupId + " and its offsets?")) return;
      try {
        await mk.api("groups/" + encodeURIComponent(groupId), {method: "DELETE"});
        mk.toast("deleted group " + groupId);
        mk.go("#/groups");
      } catch (e) { mk.toast(e.message, true); }
    }}, "Delete group"));

    function show(g) {
      summary.innerHTML = "";
      summary.appendChild(h("dl", {class: "mk-facts"},
        [["Type", g.type], ["Protocol type", g.protocol_type || "-"], ["Protocol / assignor", g.protocol || "-"],
         ["State", g.state], ["Epoch", g.epoch], ["Members", g.members.length], ["Total lag", num(g.total_lag)]]
          .map(function (kv) { return h("div", {}, h("dt", {}, kv[0]), h("dd", {"data-fact": kv[0]}, String(kv[1]))); })));
      members.set(g.members);
      noMembers.style.display = g.members.length ? "none" : "";
      offsets.set(g.offsets);
      noOffsets.style.display = g.offsets.length ? "none" : "";
      var point = {};
      g.offsets.forEach(function (o) { if (o.lag !== null) point[tpKey(o)] = o.lag; });
      if (Object.keys(point).length) chart.push(point);
      resetForm.querySelector("button").disabled = !g.empty;
      el.querySelector("#group-delete").disabled = !g.empty;
      notEmpty.style.display = g.empty ? "none" : "";
    }
    async function refresh() { show(await mk.api("groups/" + encodeURIComponent(groupId))); }
    show(g);
    return refresh;
  }

  var refresher = null;
  mk.page("groups", {
    title: "Groups",
    render: async function (el, args) {
      refresher = args.length ? await renderGroup(el, args[0]) : await renderList(el);
    },
    update: async function () { if (refresher) await refresher(); }
  });
})();
