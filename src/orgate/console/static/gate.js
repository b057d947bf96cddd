// Gate and diff: orgate gate / orgate diff on pasted or uploaded files (the server runs the gate library).
"use strict";
(() => {
  const {el, api, registerPage, table, errorBox, pretty} = window.orgateConsole;

  // A textarea with a file picker that loads a file's text into it.
  function source(id, label, placeholder) {
    const area = el("textarea", {id, placeholder, spellcheck: "false"});
    const file = el("input", {type: "file", id: `${id}-file`, accept: ".json,.jsonl,.ndjson,.txt,application/json"});
    file.addEventListener("change", async () => {
      if (file.files.length) area.value = await file.files[0].text();
    });
    return {area, node: el("div", {}, el("label", {for: id, text: label}), " ", file, area)};
  }

  function verdicts(result) {
    const summary = table(["code", "items"], result.summary.map((s) => el("tr", {"data-code": s.code},
      el("td", {}, el("span", {class: `badge code ${s.code === "ok" ? "completed" : "failed"}`, text: s.code})),
      el("td", {class: "num", text: s.items}))));
    const rows = result.items.map((v) => el("tr", {class: v.code === "ok" ? "" : "bad"},
      el("td", {class: "num", text: v.index}), el("td", {text: v.type || ""}), el("td", {text: v.name || ""}),
      el("td", {text: v.call_id || ""}), el("td", {class: "verdict-code", text: v.code}),
      el("td", {text: v.errors.length ? v.errors.map((e) => `${e.path}: ${e.message}`).join("; ") : v.message})));
    return el("div", {id: "gate-result"},
      el("p", {text: `${result.total} items, ${result.calls} function calls, ${result.failing} not ok${result.truncated ? ` (first ${result.items.length} shown)` : ""}`}),
      el("h3", {text: "Summary by code"}), summary,
      el("h3", {text: "Verdicts"}), table(["#", "type", "name", "call_id", "code", "detail"], rows));
  }

  function differences(result) {
    const rows = result.differences.map((d) => el("tr", {class: d.blocking ? "blocking" : ""},
      el("td", {text: d.kind}), el("td", {class: "num", text: d.left ?? "—"}), el("td", {class: "num", text: d.right ?? "—"}),
      el("td", {class: d.blocking ? "blocking" : "", text: d.blocking ? "blocking" : ""}),
      el("td", {}, el("pre", {class: "json", text: pretty(d.detail)}))));
    const marks = (side) => {
      const marked = new Map();
      for (const d of result.differences) {
        if (d[side] !== null && marked.get(d[side]) !== "blocking") marked.set(d[side], d.blocking ? "blocking" : "differs");
      }
      return marked;
    };
    const column = (items, side) => {
      const marked = marks(side);
      return el("div", {}, el("h4", {text: side}), items.map((item, i) =>
        el("pre", {class: `json side ${marked.get(i) || ""}`, text: `${i}: ${JSON.stringify(item)}`})));
    };
    return el("div", {id: "diff-result", class: "diff"},
      el("p", {}, "verdict: ", el("span", {class: `badge ${result.verdict === "ok" ? "completed" : "failed"}`, id: "diff-verdict", text: result.verdict}),
        ` (${result.differences.length} differences)`),
      table(["kind", "left", "right", "blocking", "detail"], rows),
      el("div", {class: "grid2"}, column(result.left, "left"), column(result.right, "right")));
  }

  function gatePage(root) {
    const log = source("gate-log", "Log", "an item, an array of items, a stored response, or a JSON Lines log");
    const tools = source("gate-tools", "Tools (optional)", "tool definitions: a request's tools array or {name: schema}");
    const gateOut = el("div");
    const runGate = el("button", {type: "button", id: "run-gate", text: "Check", onclick: async () => {
      try {
        const result = await api("/console/api/gate", {method: "POST", body: {log: log.area.value, tools: tools.area.value || null}});
        gateOut.replaceChildren(verdicts(result));
      } catch (err) {
        gateOut.replaceChildren(errorBox(err.message));
      }
    }});
    const left = source("diff-left", "Left", "a recorded response, items, or a log");
    const right = source("diff-right", "Right", "the replayed one");
    const diffOut = el("div");
    const runDiff = el("button", {type: "button", id: "run-diff", text: "Diff", onclick: async () => {
      try {
        const result = await api("/console/api/diff", {method: "POST", body: {left: left.area.value, right: right.area.value}});
        diffOut.replaceChildren(differences(result));
      } catch (err) {
        diffOut.replaceChildren(errorBox(err.message));
      }
    }});
    root.append(
      el("h2", {text: "Gate"}), el("div", {class: "grid2"}, log.node, tools.node), el("div", {class: "toolbar"}, runGate), gateOut,
      el("h2", {text: "Diff"}), el("div", {class: "grid2"}, left.node, right.node), el("div", {class: "toolbar"}, runDiff), diffOut);
  }

  registerPage("gate", gatePage);
})();
