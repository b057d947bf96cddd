// Models page: the configured upstream models, and (an admin's explicit click) a probe of one:
// what its server supports, the mode orgate uses for a JSON schema and why, and the config
// keys the findings give (to copy; `orgate models probe --write` writes them).
"use strict";
(() => {
  const {el, api, table, registerPage, errorBox, state} = window.orgateConsole;

  function report(r) {
    const rows = r.findings.map((f) => el("tr", {class: `verdict-${f.verdict}`},
      el("td", {text: f.name}), el("td", {}, el("span", {class: `badge ${f.verdict}`, text: f.verdict})),
      el("td", {class: "num", text: f.seconds.toFixed(1)}), el("td", {text: f.detail})));
    const toml = Object.entries(r.suggested).map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join("\n");
    return el("div", {class: "probe-report", id: `probe-${r.model}`},
      el("p", {text: `server: ${r.server || "not identified"} (${r.server_evidence || "not asked"}); context window: ${r.context_window ?? "unknown"} (${r.context_evidence})`}),
      table(["probe", "verdict", "s", "detail"], rows),
      el("p", {class: "probe-mode", text: `JSON schemas go as ${r.mode.now}: ${r.mode.why}`}),
      r.mode.written !== r.mode.now ? el("p", {text: `with the findings written: ${r.mode.written}: ${r.mode.written_why}`}) : null,
      el("p", {class: "muted", text: "Configuration the findings give (orgate models probe --write puts it in the file):"}),
      el("pre", {class: "json", text: toml}));
  }

  async function modelsPage(root) {
    const listing = await api("/console/api/models");
    const out = el("div", {id: "models-out"});
    const rows = listing.data.map((m) => {
      const button = el("button", {type: "button", text: "Probe"});
      button.disabled = !state.session.admin;
      button.addEventListener("click", async () => {
        if (!window.confirm(`Probe ${m.name}? About ten tiny requests to its upstream, each costing a few tokens.`)) return;
        button.disabled = true;
        out.replaceChildren(el("p", {class: "muted", text: `probing ${m.name}…`}));
        try {
          out.replaceChildren(el("h3", {text: m.name}), report(await api(`/console/api/models/${encodeURIComponent(m.name)}/probe`, {method: "POST"})));
        } catch (err) {
          out.replaceChildren(errorBox(err.message));
        } finally {
          button.disabled = false;
        }
      });
      return el("tr", {"data-model": m.name},
        el("td", {text: m.name}), el("td", {text: m.provider}), el("td", {text: m.base_url}),
        el("td", {text: m.server}), el("td", {text: m.schema_dialects.join(", ") || "none"}),
        el("td", {}, button));
    });
    root.append(el("h2", {text: "Models"}),
      el("p", {class: "muted", text: "A probe asks the model's upstream what it supports with a few tiny requests (admin keys only)."}),
      table(["model", "provider", "base URL", "server", "schema dialects", ""], rows), out);
  }

  registerPage("models", modelsPage);
})();
