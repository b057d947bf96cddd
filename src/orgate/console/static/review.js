// Review queue: open entries, an editor checked against the entry's schema as you type,
// and the three resolutions (the edit, the configured default, reject).
"use strict";
(() => {
  const {el, api, registerPage, pretty, fmtTime, errorBox, reviewAttempts} = window.orgateConsole;

  function editor(entry, onResolved) {
    const draft = entry.request && entry.attempts && entry.attempts.length
      ? entry.attempts[entry.attempts.length - 1].text : "";
    const area = el("textarea", {class: "editor", spellcheck: "false", "aria-label": "corrected JSON"});
    area.value = draft || "{}";
    const verdict = el("ul", {class: "validation"});
    const accept = el("button", {type: "button", class: "accept", text: "Accept edit", disabled: true});
    let seq = 0;
    let timer = null;
    // Parse locally at once; ask the server (the validator resolve uses) after a pause.
    const check = () => {
      window.clearTimeout(timer);
      let value;
      try {
        value = JSON.parse(area.value);
      } catch (err) {
        area.classList.add("invalid");
        accept.disabled = true;
        verdict.replaceChildren(el("li", {class: "error", text: `not JSON: ${err.message}`}));
        return;
      }
      const mine = ++seq;
      timer = window.setTimeout(async () => {
        const result = await api(`/console/api/review/${encodeURIComponent(entry.id)}/validate`, {method: "POST", body: {value}});
        if (mine !== seq) return;
        area.classList.toggle("invalid", !result.valid);
        accept.disabled = !result.valid;
        verdict.replaceChildren(...(result.valid
          ? [el("li", {class: "ok", text: "valid against the schema"})]
          : result.errors.map((e) => el("li", {class: "error", text: e}))));
      }, 250);
    };
    area.addEventListener("input", check);
    const resolve = async (body) => {
      await api(`/console/api/review/${encodeURIComponent(entry.id)}/resolve`, {method: "POST", body});
      onResolved();
    };
    accept.addEventListener("click", () => resolve({value: JSON.parse(area.value)}));
    const useDefault = entry.default === null ? null
      : el("button", {type: "button", class: "secondary default", text: "Accept default", onclick: () => resolve({value: entry.default})});
    const reject = el("button", {type: "button", class: "secondary reject", text: "Reject", onclick: () => resolve({discard: true})});
    check();
    return el("div", {}, area, verdict, el("div", {class: "toolbar"}, accept, useDefault, reject));
  }

  function entryCard(entry, reload) {
    return el("section", {class: "card review-entry", "data-id": entry.id},
      el("h4", {}, `${entry.format_name || "format"} · ${entry.model || ""} · `, el("code", {text: entry.id})),
      el("p", {class: "muted"}, `${fmtTime(entry.created_at)} · failed at ${entry.stage || "?"} · `,
        entry.response_id ? el("a", {href: `#/response/${encodeURIComponent(entry.response_id)}`, text: entry.response_id}) : "no response"),
      el("ul", {}, (entry.errors || []).map((e) => el("li", {class: "error", text: e}))),
      el("div", {class: "grid2"},
        el("div", {}, el("h5", {text: "Schema"}), el("pre", {class: "json", text: pretty(entry.schema)})),
        el("div", {}, el("h5", {text: "Correction"}), editor(entry, reload))),
      el("details", {}, el("summary", {text: `Attempts (${(entry.attempts || []).length})`}), reviewAttempts(entry)));
  }

  async function reviewPage(root) {
    const list = el("div", {id: "review-list"});
    root.append(el("h2", {text: "Review queue"}), list);
    const load = async () => {
      try {
        const page = await api("/console/api/review?status=pending");
        list.replaceChildren(...(page.data.length
          ? page.data.map((entry) => entryCard(entry, load))
          : [el("p", {class: "muted", id: "review-empty", text: "No open entries."})]));
      } catch (err) {
        list.replaceChildren(errorBox(err.message));
      }
    };
    await load();
  }

  registerPage("review", reviewPage);
})();
