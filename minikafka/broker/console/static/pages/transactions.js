/* The transactions page (see app.js for mk.page). */
mk.page("transactions", {title: "Transactions", render: async function (el, args) {
  el.appendChild(mk.h("p", {class: "mk-muted"}, "not written yet"));
}});
