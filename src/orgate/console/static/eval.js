// Eval page: reports saved by `orgate eval --save` (files or a folder of them) → the eval charts.
"use strict";
(() => {
  const {el, api, registerPage, errorBox} = window.orgateConsole;

  function evalPage(root) {
    const files = el("input", {type: "file", id: "eval-files", multiple: true, accept: ".json,application/json"});
    const folder = el("input", {type: "file", id: "eval-folder", webkitdirectory: true});
    const out = el("div", {id: "eval-out"});
    const load = async (list) => {
      const reports = [];
      for (const file of list) {
        if (!file.name.endsWith(".json")) continue;
        reports.push({name: file.webkitRelativePath || file.name, text: await file.text()});
      }
      try {
        const model = await api("/console/api/eval", {method: "POST", body: {reports}});
        out.replaceChildren();
        window.orgateEvalCharts.render(out, model);
      } catch (err) {
        out.replaceChildren(errorBox(err.message));
      }
    };
    files.addEventListener("change", () => load(files.files));
    folder.addEventListener("change", () => load(folder.files));
    root.append(el("h2", {text: "Eval"}),
      el("div", {class: "toolbar"}, el("label", {for: "eval-files", text: "Reports"}), files,
        el("label", {for: "eval-folder", text: "or a folder of them"}), folder),
      el("p", {class: "muted", text: "JSON reports written by orgate eval --save; they are read, not kept."}), out);
  }

  registerPage("eval", evalPage);
})();
