/* The live page (see app.js for mk.page). */
mk.page("live", {title: "Live", render: async function (el, args) {
  el.appendChild(mk.h("p", {class: "mk-muted"}, "not written yet"));
}});
