/* The topics page (see app.js for mk.page). */
mk.page("topics", {title: "Topics", render: async function (el, args) {
  el.appendChild(mk.h("p", {class: "mk-muted"}, "not written yet"));
}});
