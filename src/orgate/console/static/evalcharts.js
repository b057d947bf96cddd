// Eval charts: the three safety-net rates per run with the regression thresholds,
// failures by stage and the per-case table. Used by the console's Eval page and,
// inlined, by the HTML report `orgate eval --save` writes. Needs uPlot; text only.
"use strict";
window.orgateEvalCharts = (() => {
  const COLOURS = ["#2357c6", "#1e7b34", "#b3261e", "#9a6700", "#6d3fc0"];

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "text") node.textContent = String(v);
      else if (k === "class") node.className = v;
      else node.setAttribute(k, String(v));
    }
    for (const c of children.flat(Infinity)) if (c !== null && c !== undefined) node.append(c instanceof Node ? c : String(c));
    return node;
  }

  const pct = (x) => `${(x * 100).toFixed(1)}%`;

  function ratesChart(model, width) {
    const runs = model.runs;
    const xs = runs.map((r, i) => (runs.length > 1 ? r.created_at : r.created_at + i));
    const series = [{label: "run", value: (u, v) => (v === null ? "" : new Date(v * 1000).toISOString().slice(0, 16))}];
    const data = [xs];
    model.rate_names.forEach((name, i) => {
      series.push({label: name.replace(/_/g, " "), stroke: COLOURS[i], width: 2, points: {show: true, size: 7}, value: (u, v) => (v === null ? "" : pct(v))});
      data.push(runs.map((r) => r.rates[name]));
    });
    // A threshold is a rise over the previous run: drawn at the previous run's rate plus it.
    const base = runs.length > 1 ? runs[runs.length - 2] : runs[0];
    Object.entries(model.thresholds).forEach(([name, limit]) => {
      const i = model.rate_names.indexOf(name);
      series.push({label: `${name.replace(/_/g, " ")} threshold`, stroke: COLOURS[i], dash: [6, 4], width: 1, points: {show: false}, value: (u, v) => (v === null ? "" : pct(v))});
      data.push(xs.map(() => base.rates[name] + limit));
    });
    const opts = {
      title: "Safety-net rates per run",
      width, height: 300, series,
      scales: {x: {time: runs.length > 1}, y: {range: (u, min, max) => [0, Math.max(0.1, max * 1.15)]}},
      axes: [{}, {values: (u, ticks) => ticks.map(pct), size: 60}],
    };
    const box = el("div", {class: "chart", id: "eval-rates"});
    new window.uPlot(opts, data, box);
    return box;
  }

  function stagesChart(latest, width) {
    const stages = Object.keys(latest.failures_by_stage);
    const box = el("div", {class: "chart", id: "eval-stages"});
    if (!stages.length) return el("p", {class: "muted", text: "No failed attempts in the latest run."});
    const opts = {
      title: "Failed attempts by stage (latest run)",
      width, height: 240,
      scales: {x: {time: false, range: [-0.5, stages.length - 0.5]}, y: {range: (u, min, max) => [0, max * 1.2 + 1]}},
      axes: [{values: (u, ticks) => ticks.map((t) => stages[t] || ""), splits: () => stages.map((s, i) => i)}, {}],
      series: [{}, {label: "failed attempts", fill: "#b3261e99", stroke: "#b3261e", paths: window.uPlot.paths.bars({size: [0.6, 80]}), points: {show: false}}],
    };
    new window.uPlot(opts, [stages.map((s, i) => i), stages.map((s) => latest.failures_by_stage[s])], box);
    return box;
  }

  function caseTable(latest) {
    const head = ["case", "format", "requests", "first-attempt failure", "budget exhaustion", "retries", "p50 ms"];
    return el("table", {id: "eval-cases"},
      el("thead", {}, el("tr", {}, head.map((h) => el("th", {text: h})))),
      el("tbody", {}, latest.per_case.map((c) => el("tr", {},
        el("td", {text: c.name}), el("td", {text: c.format}), el("td", {class: "num", text: c.requests}),
        el("td", {class: "num", text: pct(c.first_attempt_failure_rate)}), el("td", {class: "num", text: pct(c.budget_exhaustion_rate)}),
        el("td", {class: "num", text: c.retries}), el("td", {class: "num", text: c.p50_ms})))));
  }

  // The modes of one comparison (orgate eval --modes): each rate a group of bars, one per mode
  // (one slot per rate and mode on the x axis, a gap slot between groups).
  function modesChart(modes, rateNames, width) {
    const box = el("div", {class: "chart", id: "eval-modes"});
    const slots = modes.length + 1;
    const xs = Array.from({length: rateNames.length * slots}, (v, k) => k);
    const group = (k) => rateNames[Math.floor(k / slots)] || "";
    const series = [{label: "rate", value: (u, v) => (v === null ? "" : group(v).replace(/_/g, " "))}];
    const data = [xs];
    modes.forEach((m, j) => {
      const colour = COLOURS[j % COLOURS.length];
      series.push({
        label: m.mode, stroke: colour, fill: `${colour}aa`,
        paths: window.uPlot.paths.bars({size: [0.9, 60]}),
        points: {show: false}, value: (u, v) => (v === null ? "" : pct(v)),
      });
      data.push(xs.map((k) => (k % slots === j ? m.rates[group(k)] : null)));
    });
    const centres = rateNames.map((name, i) => i * slots + (modes.length - 1) / 2);
    const opts = {
      title: "Safety-net rates per mode",
      width, height: 280, series,
      scales: {x: {time: false, range: [-0.8, xs.length - 0.2]}, y: {range: (u, min, max) => [0, Math.max(0.1, max * 1.15)]}},
      axes: [
        {splits: () => centres, values: (u, ticks) => ticks.map((t) => group(Math.round(t)).replace(/_/g, " "))},
        {values: (u, ticks) => ticks.map(pct), size: 60},
      ],
    };
    new window.uPlot(opts, data, box);
    return box;
  }

  function modesTable(modes) {
    const head = ["mode", "requests", "first-attempt failure", "of them at the schema stage", "retry recovery", "budget exhaustion", "upstream calls / request", "p50 s", "p95 s", "sent as"];
    return el("table", {id: "eval-modes-table"},
      el("thead", {}, el("tr", {}, head.map((h) => el("th", {text: h})))),
      el("tbody", {}, modes.map((m) => el("tr", {},
        el("td", {text: m.mode}), el("td", {class: "num", text: m.requests}),
        el("td", {class: "num", text: pct(m.rates.first_attempt_failure_rate)}),
        el("td", {class: "num", text: pct(m.schema_first_failure_rate)}),
        el("td", {class: "num", text: pct(m.rates.retry_recovery_rate)}),
        el("td", {class: "num", text: pct(m.rates.budget_exhaustion_rate)}),
        el("td", {class: "num", text: m.upstream_calls.toFixed(2)}),
        el("td", {class: "num", text: (m.latency_ms.p50 / 1000).toFixed(2)}),
        el("td", {class: "num", text: (m.latency_ms.p95 / 1000).toFixed(2)}),
        el("td", {text: Object.entries(m.modes_used).map(([k, v]) => `${k} ${v}`).join(", ")})))));
  }

  function comparison(model) {
    if (!model.comparison) return null;
    return el("table", {id: "eval-comparison"},
      el("thead", {}, el("tr", {}, ["rate", "previous run", "latest run", ""].map((h) => el("th", {text: h})))),
      el("tbody", {}, model.comparison.map((c) => el("tr", {},
        el("td", {text: c.rate}), el("td", {class: "num", text: pct(c.previous)}), el("td", {class: "num", text: pct(c.latest)}),
        el("td", {class: c.regressed ? "error" : "", text: c.regressed ? "regressed" : ""})))));
  }

  function render(root, model) {
    const width = Math.max(480, Math.min(1100, root.clientWidth || 900));
    if (!model.runs.length) {
      root.append(el("p", {class: "muted", text: "No reports."}));
      return;
    }
    const latest = model.latest;
    if (model.modes && model.modes.length) {
      root.append(el("h3", {text: "Modes side by side (latest comparison)"}),
        el("div", {class: "charts"}, modesChart(model.modes, model.rate_names, Math.min(width, 900))),
        modesTable(model.modes));
    }
    root.append(
      el("p", {text: `${model.runs.length} run(s); latest: ${latest.model}, ${new Date(latest.created_at * 1000).toISOString().slice(0, 19)}`}),
      el("div", {class: "charts"}, ratesChart(model, width)),
      comparison(model),
      el("h3", {text: "Failures by stage"}), stagesChart(latest, Math.min(width, 700)),
      el("h3", {text: "Cases (latest run)"}), caseTable(latest));
  }

  return {render};
})();
