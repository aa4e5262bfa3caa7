/* The captures page (see app.js for mk.page). */
mk.page("captures", {title: "Captures", render: async function (el, args) {
  el.appendChild(mk.h("p", {class: "mk-muted"}, "not written yet"));
}});
