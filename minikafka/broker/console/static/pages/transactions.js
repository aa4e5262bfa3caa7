/* The transactions page: transactional ids from the transaction coordinator and the producers each
 * partition leader knows (DescribeProducers), refreshed every second. */
(function () {
  "use strict";
  var h = mk.h;
  var refresher = null;

  function txnColumns() {
    return [
      {key: "transactional_id", label: "Transactional id"},
      {key: "state", label: "State", render: function (t) {
        return h("span", {class: "mk-badge" + (t.state === "Ongoing" ? " ok" : "")}, t.state); }},
      {key: "producer_id", label: "Producer id"}, {key: "producer_epoch", label: "Epoch"},
      {key: "timeout_ms", label: "Timeout (ms)"},
      {key: "start_ms", label: "Started", render: function (t) { return mk.fmtTime(t.start_ms); }},
      {key: "duration_ms", label: "Open for (ms)", render: function (t) { return t.duration_ms === null ? "-" : t.duration_ms; }},
      {key: "partitions", label: "Partitions in the transaction", render: function (t) {
        return t.partitions.length ? t.partitions.map(function (p) { return p[0] + "-" + p[1]; }).join(", ") : "-"; },
       sort: function (t) { return t.partitions.length; }},
      {key: "groups", label: "Groups", render: function (t) { return t.groups.join(", ") || "-"; }}];
  }

  function producerColumns() {
    return [
      {key: "topic", label: "Topic"}, {key: "partition", label: "Partition"}, {key: "leader", label: "Leader"},
      {key: "producer_id", label: "Producer id"}, {key: "producer_epoch", label: "Epoch"},
      {key: "last_sequence", label: "Last sequence"},
      {key: "last_timestamp", label: "Last timestamp", render: function (p) { return mk.fmtTime(p.last_timestamp); }},
      {key: "coordinator_epoch", label: "Coordinator epoch"},
      {key: "current_txn_start_offset", label: "Open transaction from", render: function (p) {
        return p.current_txn_start_offset < 0 ? "-" : p.current_txn_start_offset; }}];
  }

  mk.page("transactions", {
    title: "Transactions and producers",
    render: async function (el) {
      var txCard = h("div", {class: "mk-card"}, h("h2", {}, "Transactional ids"));
      var txNone = h("p", {class: "mk-muted", id: "transactions-none"}, "No transactional ids yet: a producer with transactional.id makes one.");
      el.appendChild(txCard);
      var txns = mk.liveTable(txCard, txnColumns(), {id: "transactions-table"});
      txCard.appendChild(txNone);
      var prCard = h("div", {class: "mk-card"}, h("h2", {}, "Producers per partition"));
      var prNone = h("p", {class: "mk-muted", id: "producers-none"}, "No idempotent or transactional producer has written yet.");
      el.appendChild(prCard);
      var producers = mk.liveTable(prCard, producerColumns(), {id: "producers-table"});
      prCard.appendChild(prNone);
      refresher = async function () {
        var d = await mk.api("transactions");
        txns.set(d.transactions);
        txNone.style.display = d.transactions.length ? "none" : "";
        producers.set(d.producers);
        prNone.style.display = d.producers.length ? "none" : "";
      };
      await refresher();
    },
    update: async function () { await refresher(); }
  });
})();
