/* The messages page (see app.js for mk.page). */
mk.page("messages", {title: "Messages", render: async function (el, args) {
  el.appendChild(mk.h("p", {class: "mk-muted"}, "not written yet"));
}});
