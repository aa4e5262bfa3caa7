/* The captures page: start and stop capturing, the capture files (each downloadable as a pcap), and the
 * PySpark analysis of the captures with its report. */
(function () {
  "use strict";
  var h = mk.h;
  var refresher = null;

  function bytes(n) { return n >= 1024 ? mk.fmt(n / 1024) + " KiB" : n + " B"; }

  function fileColumns() {
    return [
      {key: "name", label: "File", render: function (f) { return h("span", {class: "mk-mono"}, f.name); }},
      {key: "broker", label: "Broker"},
      {key: "size", label: "Size", render: function (f) { return bytes(f.size); }},
      {key: "modified", label: "Modified", render: function (f) { return mk.fmtTime(f.modified * 1000); }},
      {key: "writing", label: "State", render: function (f) { return f.writing ? h("span", {class: "mk-badge ok"}, "writing") : "closed"; }},
      {key: "download", label: "Download", render: function (f) {
        return h("a", {href: "/console/api/captures/files/" + encodeURIComponent(f.name) + "/pcap", download: "",
                       class: "mk-pcap", "data-file": f.name}, "pcap"); }}];
  }

  async function act(path) {
    try { await mk.api(path, {method: "POST"}); await refresher(); }
    catch (e) { mk.toast(e.message, true); }
  }

  mk.page("captures", {
    title: "Captures",
    render: async function (el) {
      var status = h("div", {class: "mk-card", id: "capture-status"});
      el.appendChild(status);
      var startBtn = h("button", {id: "capture-start", onclick: function () { return act("captures/start"); }}, "Start capture");
      var stopBtn = h("button", {id: "capture-stop", class: "mk-danger", onclick: function () { return act("captures/stop"); }}, "Stop capture");
      var state = h("p", {id: "capture-state"});
      status.appendChild(state);
      status.appendChild(h("p", {}, startBtn, " ", stopBtn));

      var filesCard = h("div", {class: "mk-card"}, h("h2", {}, "Capture files"));
      el.appendChild(filesCard);
      var files = mk.liveTable(filesCard, fileColumns(), {id: "capture-files"});
      var none = h("p", {class: "mk-muted", id: "capture-none"}, "No capture files yet: start a capture.");
      filesCard.appendChild(none);
      filesCard.appendChild(h("p", {}, h("a", {href: "/console/api/captures/files/all/pcap", download: "",
                                              id: "capture-all"}, "Download every file as one pcap")));

      var anCard = h("div", {class: "mk-card", id: "capture-analysis"}, h("h2", {}, "Analysis"),
        h("p", {class: "mk-muted"}, "Runs minikafka analyze (PySpark) over the capture directory, one run at a time."));
      el.appendChild(anCard);
      var anBtn = h("button", {id: "analysis-start", onclick: function () { return act("captures/analyze"); }}, "Run the analysis");
      var anState = h("p", {id: "analysis-state"});
      var anOut = h("pre", {id: "analysis-output", class: "mk-muted"});
      var report = h("a", {href: "/console/api/captures/report", target: "_blank", id: "analysis-report"}, "Open the report");
      anCard.appendChild(h("p", {}, anBtn));
      anCard.appendChild(anState);
      anCard.appendChild(report);
      anCard.appendChild(anOut);

      function show(d) {
        state.innerHTML = "";
        state.appendChild(d.capturing
          ? h("span", {}, h("span", {class: "mk-badge ok"}, "capturing"), " into ", h("code", {}, d.directory), " (" +
              d.brokers.map(function (b) { return "broker " + b.id + ": " + b.captured + " written, " + b.dropped + " dropped"; }).join("; ") + ")")
          : h("span", {}, h("span", {class: "mk-badge"}, "not capturing"), " (captures go to ", d.directory ? h("code", {}, d.directory) : "a temporary directory", ")"));
        startBtn.disabled = d.capturing;
        stopBtn.disabled = !d.capturing;
        files.set(d.files);
        none.style.display = d.files.length ? "none" : "";
        el.querySelector("#capture-all").style.display = d.files.length ? "" : "none";
        var a = d.analysis;
        anBtn.disabled = !d.analysis_available || !d.files.length || (a && a.state === "running");
        anState.textContent = !d.analysis_available ? "PySpark is not installed: pip install 'minikafka[analysis]'."
          : !a ? "Not run yet." : "Analysis " + a.state + (a.returncode !== null ? " (exit " + a.returncode + ")" : "") +
            ", started " + mk.fmtTime(a.started * 1000) + (a.finished ? ", finished " + mk.fmtTime(a.finished * 1000) : "");
        report.style.display = a && a.report ? "" : "none";
        anOut.textContent = a ? a.output : "";
      }
      refresher = async function () { show(await mk.api("captures")); };
      await refresher();
    },
    update: async function () { await refresher(); }
  });
})();
