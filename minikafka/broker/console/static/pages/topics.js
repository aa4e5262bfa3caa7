/* The topics page: #/topics lists the topics the user may describe (partitions, replication, messages,
 * bytes) with a create form; #/topics/<name> shows one topic's partitions (offsets, sizes, leadership),
 * its configs (with their source) and forms to alter them or delete the topic.  Every action is a Kafka
 * request the broker validates (CreateTopics, DeleteTopics, IncrementalAlterConfigs). */
(function () {
  "use strict";
  var h = mk.h;

  function bytes(n) {
    if (n === null || n === undefined) return "-";
    if (n >= 1 << 30) return (n / (1 << 30)).toFixed(2) + " GiB";
    if (n >= 1 << 20) return (n / (1 << 20)).toFixed(2) + " MiB";
    if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + " KiB";
    return n + " B";
  }
  function num(v) { return v === null || v === undefined ? "-" : String(v); }
  function topicLink(name) { return h("a", {href: "#/topics/" + encodeURIComponent(name), class: "mk-topic"}, name); }

  /* "key=value" lines (or comma separated) as an object. */
  function parsePairs(text) {
    var out = {};
    (text || "").split(/[\n,]/).forEach(function (line) {
      line = line.trim();
      if (!line) return;
      var i = line.indexOf("=");
      if (i <= 0) throw new Error("expected key=value, got " + JSON.stringify(line));
      out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
    });
    return out;
  }

  async function deleteTopic(name) {
    if (!window.confirm("Delete topic " + name + " and all its records?")) return false;
    await mk.api("topics/" + encodeURIComponent(name), {method: "DELETE"});
    mk.toast("topic " + name + " deleted");
    return true;
  }

  var list = null;

  async function renderList(el) {
    var d = await mk.api("topics");
    if (d.can_create) {
      el.appendChild(h("div", {class: "mk-card"}, h("h2", {}, "Create a topic"),
        mk.form([{name: "name", label: "Name", placeholder: "orders"},
                 {name: "partitions", label: "Partitions", type: "number", value: "1"},
                 {name: "replication_factor", label: "Replication factor", type: "number", value: "1"},
                 {name: "configs", label: "Configs (key=value per line)", type: "textarea", rows: 2,
                  placeholder: "retention.ms=86400000"}], "Create", async function (v) {
          var created = await mk.api("topics", {method: "POST", body: {
            name: v.name, partitions: v.partitions, replication_factor: v.replication_factor,
            configs: parsePairs(v.configs)}});
          mk.toast("topic " + created.name + " created");
          await refreshList();
        }, {id: "topic-create"})));
    }
    el.appendChild(h("h2", {}, "Topics"));
    list = mk.liveTable(el, [
      {key: "name", label: "name", render: function (t) { return topicLink(t.name); }, sort: function (t) { return t.name; }},
      {key: "partitions", label: "partitions"},
      {key: "replication_factor", label: "replication"},
      {key: "internal", label: "internal", render: function (t) { return t.internal ? "yes" : ""; }},
      {key: "messages", label: "messages"},
      {key: "size", label: "size", render: function (t) { return bytes(t.size); }, sort: function (t) { return t.size; }},
      {key: "under_replicated", label: "under-replicated", render: function (t) {
        return t.under_replicated ? h("span", {class: "mk-badge bad"}, String(t.under_replicated)) : ""; }},
      {key: "actions", label: "", render: function (t) {
        return [h("a", {href: "#/messages/" + encodeURIComponent(t.name)}, "messages"), " ",
                t.can_delete ? h("button", {class: "mk-link mk-delete", type: "button", "data-topic": t.name,
                  onclick: async function () {
                    try { if (await deleteTopic(t.name)) await refreshList(); } catch (e) { mk.toast(e.message, true); }
                  }}, "delete") : ""]; }}
    ], {id: "topics"});
    list.set(d.topics);
    el.appendChild(h("p", {class: "mk-muted", id: "topics-count"}, d.topics.length + " topic(s) you may describe"));
  }

  async function refreshList() {
    if (!list) return;
    var d = await mk.api("topics");
    list.set(d.topics);
    var c = document.getElementById("topics-count");
    if (c) c.textContent = d.topics.length + " topic(s) you may describe";
  }

  var detail = null;

  async function renderDetail(el, name) {
    var d = await mk.api("topics/" + encodeURIComponent(name));
    el.querySelector("h1").textContent = "Topic " + name;
    var summary = h("div", {class: "mk-card", id: "topic-summary"});
    el.appendChild(summary);
    el.appendChild(h("h2", {}, "Partitions"));
    var parts = mk.liveTable(el, [
      {key: "partition", label: "partition"},
      {key: "log_start_offset", label: "log start", render: function (p) { return num(p.log_start_offset); }},
      {key: "high_watermark", label: "high watermark", render: function (p) { return num(p.high_watermark); }},
      {key: "last_stable_offset", label: "last stable", render: function (p) { return num(p.last_stable_offset); }},
      {key: "log_end_offset", label: "log end", render: function (p) { return num(p.log_end_offset); }},
      {key: "size", label: "size", render: function (p) { return bytes(p.size); }, sort: function (p) { return p.size; }},
      {key: "leader", label: "leader"},
      {key: "leader_epoch", label: "epoch"},
      {key: "replicas", label: "replicas", render: function (p) { return p.replicas.join(", "); }},
      {key: "isr", label: "ISR", render: function (p) { return p.isr.join(", "); }}
    ], {id: "partitions", filter: false});
    el.appendChild(h("h2", {}, "Configs"));
    if (d.can_alter_configs) {
      el.appendChild(mk.form([
        {name: "name", label: "Config", placeholder: "retention.ms"},
        {name: "value", label: "Value"},
        {name: "op", label: "Operation", type: "select", options: ["set", "delete"], value: "set"}
      ], "Apply", async function (v) {
        var body = v.op === "delete" ? {"delete": [v.name]} : {"set": {}};
        if (v.op !== "delete") body.set[v.name] = v.value;
        await mk.api("topics/" + encodeURIComponent(name) + "/configs", {method: "POST", body: body});
        mk.toast(v.name + (v.op === "delete" ? " reset to its default" : " = " + v.value));
        await refreshDetail(name);
      }, {id: "config-alter"}));
    }
    var configsError = h("p", {class: "mk-error", id: "configs-error"});
    el.appendChild(configsError);
    var configs = mk.liveTable(el, [
      {key: "name", label: "name"},
      {key: "value", label: "value", render: function (c) { return c.value === null ? "(null)" : c.value; }},
      {key: "source", label: "source", render: function (c) {
        return h("span", {class: "mk-badge" + (c.is_default ? "" : " ok")}, c.source); }}
    ], {id: "configs"});
    if (d.can_delete) {
      el.appendChild(h("p", {}, h("button", {class: "mk-danger", id: "topic-delete", type: "button",
        onclick: async function () {
          try { if (await deleteTopic(name)) mk.go("#/topics"); } catch (e) { mk.toast(e.message, true); }
        }}, "Delete topic")));
    }
    detail = {name: name, summary: summary, parts: parts, configs: configs, configsError: configsError};
    fill(d);
  }

  function fill(d) {
    var s = detail.summary;
    s.innerHTML = "";
    s.appendChild(h("div", {}, d.partitions + " partition(s), replication factor " + d.replication_factor +
      ", " + d.messages + " message(s), " + bytes(d.size) + (d.internal ? ", internal" : "") + " \u00b7 id ",
      h("span", {class: "mk-mono"}, d.topic_id), " \u00b7 ",
      h("a", {href: "#/messages/" + encodeURIComponent(d.name)}, "browse messages")));
    detail.parts.set(d.partition_details);
    detail.configs.set(d.configs);
    detail.configsError.textContent = d.configs_error ? "configs: " + d.configs_error : "";
  }

  async function refreshDetail(name) {
    if (!detail || detail.name !== name) return;
    fill(await mk.api("topics/" + encodeURIComponent(name)));
  }

  mk.page("topics", {title: "Topics", interval: 2000,
    render: async function (el, args) {
      list = detail = null;
      if (args.length) await renderDetail(el, args[0]); else await renderList(el);
    },
    update: async function (el, args) {
      if (args.length) await refreshDetail(args[0]); else await refreshList();
    }});
})();
