/* The cluster page (see app.js for mk.page). */
mk.page("cluster", {title: "Cluster", render: async function (el, args) {
  el.appendChild(mk.h("p", {class: "mk-muted"}, "not written yet"));
}});
