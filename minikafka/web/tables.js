/* Sortable, filterable tables (shared by the minikafka console and the analysis report).
 * mkTables.enhance(root): every <table class="mk-table"> under root gets a filter box above it and
 * headers that sort on click (numbers numerically, the rest as text; click again to reverse). */
(function (global) {
  "use strict";
  function cellValue(row, i) {
    var c = row.cells[i];
    if (!c) return "";
    var v = c.getAttribute("data-sort");
    return v !== null ? v : c.textContent.trim();
  }
  function compare(a, b) {
    var x = parseFloat(a), y = parseFloat(b);
    var numeric = !isNaN(x) && !isNaN(y) && isFinite(a) && isFinite(b);
    if (numeric) return x - y;
    return a.localeCompare(b, undefined, {numeric: true});
  }
  function sortBy(table, i, th) {
    var body = table.tBodies[0];
    if (!body) return;
    var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (r1, r2) { return dir * compare(cellValue(r1, i), cellValue(r2, i)); });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  function filter(table, text) {
    var needle = text.toLowerCase();
    Array.prototype.forEach.call(table.tBodies[0] ? table.tBodies[0].rows : [], function (r) {
      r.style.display = !needle || r.textContent.toLowerCase().indexOf(needle) >= 0 ? "" : "none";
    });
  }
  function enhance(root) {
    (root || document).querySelectorAll("table.mk-table").forEach(function (table) {
      if (table.getAttribute("data-mk-enhanced")) return;
      table.setAttribute("data-mk-enhanced", "1");
      if (table.tHead && table.tHead.rows.length) {
        Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
          th.classList.add("mk-sortable");
          th.title = "sort";
          th.addEventListener("click", function () { sortBy(table, i, th); });
        });
      }
      if (!table.classList.contains("mk-nofilter")) {
        var box = document.createElement("input");
        box.type = "search";
        box.placeholder = "filter rows";
        box.className = "mk-filter";
        box.addEventListener("input", function () { filter(table, box.value); });
        table.parentNode.insertBefore(box, table);
      }
    });
  }
  global.mkTables = {enhance: enhance, sortBy: sortBy, filter: filter};
})(window);
