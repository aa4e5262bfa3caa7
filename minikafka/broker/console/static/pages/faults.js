/* The fault rules page: the rules with their matched and remaining counts (refreshed every second),
 * a form with every FaultRule field, remove one rule or all. */
(function () {
  "use strict";
  var h = mk.h;
  var refresher = null;

  var HELP = {
    api: "API name or key (Produce, Fetch, 0...)", error: "error name or code (NOT_LEADER_OR_FOLLOWER...)",
    drop: "before or after", probability: "0..1 (default 1)", count: "how many requests (default: all)"};

  /* The form's text values as a rule: empty fields left out, numbers and booleans converted. */
  function ruleFrom(values, kinds) {
    var rule = {};
    Object.keys(kinds).forEach(function (k) {
      var v = values[k], kind = kinds[k];
      if (kind === "boolean") { if (v) rule[k] = true; return; }
      if (v === undefined || v === null || String(v).trim() === "") return;
      v = String(v).trim();
      if (kind === "integer" || kind === "number") {
        var n = Number(v);
        if (isNaN(n)) throw new Error(k + " must be a number, not " + JSON.stringify(v));
        rule[k] = n;
      } else if ((k === "api" || k === "error") && /^-?\d+$/.test(v)) {
        rule[k] = Number(v);
      } else {
        rule[k] = v;
      }
    });
    return rule;
  }

  function columns() {
    return [
      {key: "id", label: "Rule"},
      {key: "match", label: "Matches", render: function (r) {
        var parts = [];
        ["api", "min_version", "max_version", "client_id", "topic", "partition", "broker"].forEach(function (k) {
          if (r[k] !== null && r[k] !== undefined) parts.push(k + "=" + r[k]);
        });
        return parts.join(" ") || "every request"; }},
      {key: "action", label: "Does", render: function (r) {
        var parts = [];
        if (r.error) parts.push("error=" + r.error + (r.per_partition ? " per partition" : ""));
        if (r.latency_ms) parts.push("latency=" + r.latency_ms + "ms");
        if (r.drop) parts.push("drop " + r.drop);
        if (r.hold || r.hold_ms !== null) parts.push(r.hold_ms !== null ? "hold " + r.hold_ms + "ms" : "hold");
        if (r.probability !== 1) parts.push("p=" + r.probability);
        if (r.after_ms) parts.push("after " + r.after_ms + "ms");
        if (r.for_ms !== null) parts.push("for " + r.for_ms + "ms");
        return parts.join(", "); }},
      {key: "matched", label: "Matched", render: function (r) {
        return h("span", {class: "mk-matched", "data-rule": r.id}, r.matched); }},
      {key: "remaining", label: "Remaining", render: function (r) { return r.remaining === null ? "\u221e" : r.remaining; },
       sort: function (r) { return r.remaining === null ? 1e18 : r.remaining; }},
      {key: "remove", label: "\u00a0", render: function (r) {
        return h("button", {class: "mk-secondary mk-remove", "data-rule": r.id, onclick: async function () {
          try { await mk.api("faults/" + r.id, {method: "DELETE"}); mk.toast("removed rule " + r.id); await refresher(); }
          catch (e) { mk.toast(e.message, true); }
        }}, "remove"); }}];
  }

  mk.page("faults", {
    title: "Fault rules",
    render: async function (el) {
      var data = await mk.api("faults");
      var kinds = data.fields;
      var card = h("div", {class: "mk-card"}, h("h2", {}, "Rules"));
      el.appendChild(card);
      var none = h("p", {class: "mk-muted", id: "faults-none"}, "No fault rules: requests are answered normally.");
      var t = mk.liveTable(card, columns(), {id: "faults-table"});
      card.appendChild(none);
      card.appendChild(h("button", {class: "mk-danger", id: "faults-clear", onclick: async function () {
        try { var r = await mk.api("faults", {method: "DELETE"}); mk.toast("removed " + r.removed + " rule(s)"); await refresher(); }
        catch (e) { mk.toast(e.message, true); }
      }}, "Remove all"));

      var addCard = h("div", {class: "mk-card"}, h("h2", {}, "Add a rule"),
        h("p", {class: "mk-muted"}, "A rule matches requests (empty fields match anything) and needs an action: " +
          "an error, latency, drop, hold. See the fault injection guide for every field."));
      el.appendChild(addCard);
      var errorBox = h("p", {class: "mk-error", id: "faults-error"});
      var fields = Object.keys(kinds).map(function (k) {
        return {name: k, label: k, type: kinds[k] === "boolean" ? "checkbox" : "text", placeholder: HELP[k] || kinds[k]};
      });
      addCard.appendChild(mk.form(fields, "Add rule", async function (values) {
        errorBox.textContent = "";
        try {
          var r = await mk.api("faults", {method: "POST", body: ruleFrom(values, kinds)});
          mk.toast("added rule " + r.rule.id);
          await refresher();
        } catch (e) { errorBox.textContent = e.message || String(e); }
      }, {id: "faults-form"}));
      addCard.appendChild(errorBox);

      function show(rules) {
        t.set(rules);
        none.style.display = rules.length ? "none" : "";
        el.querySelector("#faults-clear").disabled = !rules.length;
      }
      refresher = async function () { show((await mk.api("faults")).rules); };
      show(data.rules);
    },
    update: async function () { await refresher(); }
  });
})();
