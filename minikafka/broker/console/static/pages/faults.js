/* The faults page (see app.js for mk.page). */
mk.page("faults", {title: "Faults", render: async function (el, args) {
  el.appendChild(mk.h("p", {class: "mk-muted"}, "not written yet"));
}});
