/* The groups page (see app.js for mk.page). */
mk.page("groups", {title: "Groups", render: async function (el, args) {
  el.appendChild(mk.h("p", {class: "mk-muted"}, "not written yet"));
}});
