// Overview: request rate, error rate and upstream latency percentiles per model and deployment,
// drawn from the differences between snapshots of the server's metrics polled while the page is open.
"use strict";
(() => {
  const {el, api, registerPage, every, errorBox, table, state} = window.orgateConsole;
  const COLOURS = ["#2357c6", "#1e7b34", "#b3261e", "#9a6700", "#6d3fc0", "#00838f", "#c2185b"];
  const KEEP = 180; // snapshots kept: six minutes at one every two seconds

  // The q-quantile of the observations between two cumulative histograms (linear within a bucket).
  function quantile(now, before, q) {
    const prev = new Map((before || []).map(([le, n]) => [le, n]));
    const counts = now.map(([le, n]) => [le, n - (prev.get(le) || 0)]);
    const total = counts.length ? counts[counts.length - 1][1] : 0;
    if (total <= 0) return null;
    const rank = q * total;
    let lower = 0;
    let below = 0;
    for (const [le, n] of counts) {
      if (n >= rank) {
        if (le === null) return lower;
        return lower + ((rank - below) / Math.max(n - below, 1e-9)) * (le - lower);
      }
      below = n;
      if (le !== null) lower = le;
    }
    return lower;
  }

  function chart(id, title, unit, names, xs, columns, width) {
    const box = el("div", {class: "chart", id});
    const series = [{}, ...names.map((name, i) => ({label: name, stroke: COLOURS[i % COLOURS.length], width: 2, spanGaps: true,
      value: (u, v) => (v === null ? "" : `${v.toFixed(unit === "%" ? 1 : 3)} ${unit}`)}))];
    const opts = {title, width, height: 220, series, scales: {x: {range: (u, min, max) => [Math.min(min, max - 60), max]}, y: {range: (u, min, max) => [0, Math.max(max * 1.2, unit === "%" ? 5 : 0.01)]}}, axes: [{}, {size: 60}]};
    new window.uPlot(opts, [xs, ...columns], box);
    return box;
  }

  function overviewPage(root) {
    if (!state.session.admin) {
      root.append(el("h2", {text: "Overview"}), el("p", {class: "muted", id: "overview-admin-only",
        text: "The overview shows every tenant's traffic: sign in with an admin key (admin = true in [auth])."}));
      return;
    }
    const charts = el("div", {class: "charts", id: "overview-charts"});
    const totals = el("div", {id: "overview-totals"});
    const note = el("p", {class: "muted", text: "Collecting: the charts start with the second sample (every two seconds while this page is open)."});
    root.append(el("h2", {text: "Overview"}), note, charts, totals);
    const snaps = [];
    const width = Math.max(420, Math.min(660, (root.clientWidth || 1200) / 2 - 40));
    const draw = () => {
      if (snaps.length < 2) return;
      const xs = snaps.slice(1).map((s) => s.at);
      const pairs = snaps.slice(1).map((s, i) => [snaps[i], s]);
      const models = [...new Set(snaps.flatMap((s) => Object.keys(s.models)))].sort();
      const deps = [...new Set(snaps.flatMap((s) => Object.keys(s.deployments)))].sort();
      const delta = (a, b, key) => ((b && b[key]) || 0) - ((a && a[key]) || 0);
      const reqRate = models.map((m) => pairs.map(([a, b]) => delta(a.models[m], b.models[m], "requests") / (b.at - a.at)));
      const errRate = models.map((m) => pairs.map(([a, b]) => {
        const n = delta(a.models[m], b.models[m], "requests");
        return n > 0 ? (100 * delta(a.models[m], b.models[m], "errors")) / n : null;
      }));
      const lat = (q) => deps.map((d) => pairs.map(([a, b]) =>
        (b.deployments[d] ? quantile(b.deployments[d].buckets, a.deployments[d] && a.deployments[d].buckets, q) : null)));
      charts.replaceChildren(
        chart("overview-rate", "Requests per second, by model", "req/s", models, xs, reqRate, width),
        chart("overview-errors", "Error rate, by model", "%", models, xs, errRate, width),
        chart("overview-p50", "Upstream latency p50, by deployment", "s", deps, xs, lat(0.5), width),
        chart("overview-p95", "Upstream latency p95, by deployment", "s", deps, xs, lat(0.95), width));
      note.hidden = true;
      const last = snaps[snaps.length - 1];
      totals.replaceChildren(el("h3", {text: "Since the nodes started"}),
        table(["model", "requests", "errors"], models.map((m) => el("tr", {}, el("td", {text: m}),
          el("td", {class: "num", text: (last.models[m] || {}).requests || 0}), el("td", {class: "num", text: (last.models[m] || {}).errors || 0})))),
        table(["deployment", "upstream calls", "errors", "p50", "p95", "tokens in", "tokens out"], deps.map((d) => {
          const x = last.deployments[d];
          const p = (q) => {
            const v = quantile(x.buckets, null, q);
            return v === null ? "" : `${v.toFixed(3)} s`;
          };
          return el("tr", {}, el("td", {text: d}), el("td", {class: "num", text: x.calls}), el("td", {class: "num", text: x.errors}),
            el("td", {class: "num", text: p(0.5)}), el("td", {class: "num", text: p(0.95)}),
            el("td", {class: "num", text: x.input_tokens}), el("td", {class: "num", text: x.output_tokens}));
        })));
    };
    const poll = async () => {
      try {
        snaps.push(await api("/console/api/overview"));
        if (snaps.length > KEEP) snaps.shift();
        draw();
      } catch (err) {
        root.replaceChildren(el("h2", {text: "Overview"}), errorBox(err.message));
        throw err;
      }
    };
    poll().then(() => every(2000, () => poll().catch(() => {})), () => {});
  }

  registerPage("overview", overviewPage);
})();
