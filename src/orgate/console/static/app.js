// orgate console: a hash-routed page over the /console/api endpoints.
// Every value from the server is rendered with textContent (never as HTML).
"use strict";

const state = {session: null, timers: []};

// ---------------------------------------------------------------- helpers

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "text") node.textContent = String(value);
    else if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

function fmtTime(seconds) {
  return seconds ? new Date(seconds * 1000).toISOString().replace("T", " ").slice(0, 19) : "";
}

function pretty(value) {
  return JSON.stringify(value, null, 2);
}

class SignedOut extends Error {}

async function api(path, options = {}) {
  const init = {credentials: "same-origin", headers: {}, ...options};
  if (init.body !== undefined && typeof init.body !== "string") {
    init.body = JSON.stringify(init.body);
    init.headers["Content-Type"] = "application/json";
  }
  if (init.method && init.method !== "GET" && state.session) {
    init.headers["X-CSRF-Token"] = state.session.csrf_token;
  }
  const response = await fetch(path, init);
  const body = await response.json().catch(() => ({}));
  if (response.status === 401) {
    window.location.reload();
    throw new SignedOut();
  }
  if (!response.ok) {
    const message = (body.error && body.error.message) || `HTTP ${response.status}`;
    throw new Error(message);
  }
  return body;
}

function every(ms, fn) {
  const id = window.setInterval(() => {
    if (!document.hidden) fn();
  }, ms);
  state.timers.push(id);
}

function errorBox(message) {
  return el("p", {class: "error", role: "alert", text: message});
}

function table(headers, rows) {
  return el("table", {},
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", {text: h})))),
    el("tbody", {}, rows));
}

// ---------------------------------------------------------------- traffic

function trafficRow(r) {
  const tokens = r.usage ? `${r.usage.input_tokens ?? "?"} / ${r.usage.output_tokens ?? "?"}` : "";
  const link = el("a", {href: `#/response/${encodeURIComponent(r.id)}?tenant=${encodeURIComponent(r.tenant)}`, text: r.id});
  return el("tr", {"data-id": r.id, class: `status-${r.status}`},
    el("td", {text: fmtTime(r.created_at)}),
    el("td", {}, link),
    el("td", {}, el("span", {class: `badge ${r.status}`, text: r.status})),
    el("td", {text: r.model || ""}),
    el("td", {text: r.deployment || ""}),
    el("td", {class: "num", text: r.latency_s === null ? "" : `${r.latency_s.toFixed(1)} s`}),
    el("td", {class: "num", text: tokens}),
    el("td", {class: r.gate_findings.length ? "finding" : "", text: r.gate_findings.join(", ")}),
    el("td", {text: r.structured || ""}),
    state.session.admin ? el("td", {text: r.tenant}) : null);
}

function trafficPage(root, params) {
  const filters = {status: params.get("status") || "", model: params.get("model") || "", session_id: params.get("session_id") || "", tenant: params.get("tenant") || ""};
  const status = el("select", {name: "status"},
    ["", "completed", "in_progress", "queued", "incomplete", "failed", "cancelled"].map((s) =>
      el("option", {value: s, text: s || "any status", selected: s === filters.status})));
  const model = el("input", {name: "model", placeholder: "model", value: filters.model});
  const session = el("input", {name: "session_id", placeholder: "session", value: filters.session_id});
  // Admin keys see every tenant and may narrow the list to one.
  const tenant = state.session.admin ? el("input", {name: "tenant", placeholder: "tenant", value: filters.tenant}) : null;
  const form = el("form", {class: "filters", onsubmit: (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of [["status", status.value], ["model", model.value], ["session_id", session.value], ["tenant", tenant && tenant.value]]) if (v) q.set(k, v);
    window.location.hash = `#/traffic?${q}`;
  }}, status, model, session, tenant, el("button", {type: "submit", text: "Filter"}));
  const headers = ["time", "id", "status", "model", "deployment", "duration", "tokens in/out", "gate", "structured"];
  if (state.session.admin) headers.push("tenant");
  const body = el("tbody", {id: "traffic-rows"});
  const more = el("button", {type: "button", id: "older", text: "Older", hidden: true});
  const live = el("span", {class: "live", text: "live"});
  const problem = el("div");
  root.append(el("h2", {}, "Traffic ", live), form, problem,
    el("table", {id: "traffic"}, el("thead", {}, el("tr", {}, headers.map((h) => el("th", {text: h})))), body), more);

  let cursor = null;
  const query = (extra) => {
    const q = new URLSearchParams(extra);
    for (const [k, v] of Object.entries(filters)) if (v) q.set(k, v);
    return `/console/api/responses?${q}`;
  };
  const loadOlder = async () => {
    const page = await api(query({cursor}));
    for (const r of page.data) body.append(trafficRow(r));
    cursor = page.next_cursor;
    more.hidden = !cursor;
  };
  // Live: the newest page is fetched again every two seconds while the tab is visible;
  // rows already shown are replaced in place (status changes), new ones go on top.
  const refresh = async () => {
    try {
      const page = await api(query({limit: "50"}));
      clear(problem);
      const fresh = [];
      for (const r of page.data) {
        const old = body.querySelector(`tr[data-id="${CSS.escape(r.id)}"]`);
        if (old) old.replaceWith(trafficRow(r));
        else fresh.push(trafficRow(r));
      }
      body.prepend(...fresh);
      if (cursor === null && page.next_cursor) {
        cursor = page.next_cursor;
        more.hidden = false;
      }
    } catch (err) {
      if (!(err instanceof SignedOut)) problem.replaceChildren(errorBox(err.message));
    }
  };
  more.addEventListener("click", loadOlder);
  refresh();
  every(2000, refresh);
}

// ---------------------------------------------------------------- inspector

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

function childPath(path, key) {
  if (typeof key === "number") return `${path}[${key}]`;
  return IDENT.test(key) ? `${path}.${key}` : `${path}['${key.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}']`;
}

// A JSON value as text, each value in a span carrying its JSON path, so that the
// gate's failing paths can be marked inside the arguments.
function jsonTree(value, path, marked, indent = "") {
  const node = el("span", {"data-path": path});
  if (marked.has(path)) node.className = "gate-error";
  if (Array.isArray(value) || (value && typeof value === "object")) {
    const isArray = Array.isArray(value);
    const entries = isArray ? value.map((v, i) => [i, v]) : Object.entries(value);
    node.append(isArray ? "[" : "{");
    entries.forEach(([key, v], i) => {
      node.append(`\n${indent}  `);
      if (!isArray) node.append(`${JSON.stringify(key)}: `);
      node.append(jsonTree(v, childPath(path, key), marked, `${indent}  `));
      if (i < entries.length - 1) node.append(",");
    });
    node.append(entries.length ? `\n${indent}` : "", isArray ? "]" : "}");
  } else {
    node.append(JSON.stringify(value));
  }
  return node;
}

function gateCard(verdict, item) {
  const marked = new Set(verdict.errors.map((e) => e.path));
  let args;
  try {
    args = jsonTree(JSON.parse(item.arguments), "$", marked);
  } catch {
    args = document.createTextNode(String(item.arguments));
  }
  return el("section", {class: `card gate ${verdict.code === "ok" ? "ok" : "bad"}`},
    el("h4", {}, `function_call ${verdict.name || ""} `, el("span", {class: "badge code", text: verdict.code})),
    el("p", {text: verdict.message}),
    verdict.errors.length ? el("ul", {}, verdict.errors.map((e) => el("li", {}, el("code", {text: e.path}), ` ${e.message}`))) : null,
    el("pre", {class: "json"}, args));
}

function itemCard(item) {
  const texts = typeof item.content === "string" ? [item.content] : [];
  for (const part of Array.isArray(item.content) ? item.content : []) {
    if (typeof part.text === "string") texts.push(part.text);
    if (typeof part.refusal === "string") texts.push(part.refusal);
  }
  // MCP items (mcp_list_tools, mcp_call, mcp_approval_request) name their server, tool and outcome.
  const mcp = typeof item.server_label === "string"
    ? ` · ${item.server_label}${item.name ? `/${item.name}` : ""}${item.error ? " · error" : ""}${item.approval_request_id ? " · approved" : ""}` : "";
  return el("section", {class: "card item"},
    el("h4", {text: `${item.type || "item"}${item.role ? ` · ${item.role}` : ""}${mcp}`}),
    texts.length ? el("div", {class: "text"}, texts.map((t) => el("p", {text: t}))) : el("pre", {class: "json", text: pretty(item)}));
}

async function inspectorPage(root, params, id) {
  const tenant = params.get("tenant");
  const data = await api(`/console/api/responses/${encodeURIComponent(id)}${tenant ? `?tenant=${encodeURIComponent(tenant)}` : ""}`);
  const r = data.row;
  const tq = tenant ? `?tenant=${encodeURIComponent(tenant)}` : "";
  const output = Array.isArray(data.response.output) ? data.response.output : [];
  const verdicts = new Map(data.gate.map((v) => [v.index, v]));
  root.append(el("div", {id: "inspector"},
    el("h2", {}, "Response ", el("code", {text: r.id})),
    el("dl", {class: "facts"},
      [["status", r.status], ["model", r.model], ["deployment", r.deployment], ["session", r.session_id],
      ["created", fmtTime(r.created_at)], ["duration", r.latency_s === null ? "" : `${r.latency_s}s`],
      ["tokens", r.usage ? `${r.usage.input_tokens ?? "?"} in · ${r.usage.output_tokens ?? "?"} out` : ""], ["error", r.error_code]]
      .filter(([, v]) => v).map(([k, v]) => [el("dt", {text: k}), el("dd", {text: v})])),
    el("nav", {class: "chain"},
      data.previous_response_id
        ? el("a", {id: "previous", href: `#/response/${encodeURIComponent(data.previous_response_id)}${tq}`, text: `← previous (${data.previous_response_id})`})
        : el("span", {text: "first in its chain"}),
      ` · depth ${data.depth}`),
    el("h3", {text: "Input"}), data.input.map(itemCard),
    el("h3", {text: "Output"}),
    output.map((item, i) => (verdicts.has(i) ? gateCard(verdicts.get(i), item) : itemCard(item))),
    data.structured ? reviewAttempts({id: data.structured.review_id, status: data.structured.status,
      stage: data.structured.exhausted_by, attempts: data.structured.attempts}) : data.review ? reviewAttempts(data.review) : null,
    data.translation.length ? translationCard(data.translation) : null,
    data.route ? el("section", {class: "card route"}, el("h3", {text: `Route: served by ${data.route.served_by || "none"}`}),
      el("ol", {}, data.route.attempts.map((a) => el("li", {}, el("code", {text: a.deployment}), ` ${a.error || "answered"}`)))) : null,
    el("h3", {text: `Event timeline (${data.events.length})`}),
    data.events.length
      ? el("ol", {class: "events"}, data.events.map((e) => el("li", {},
        el("code", {text: e.event || (e.data && e.data.type) || "message"}), " ",
        el("span", {class: "muted", text: e.data && e.data.sequence_number !== undefined ? `#${e.data.sequence_number}` : ""}))))
      : el("p", {class: "muted", text: "No stored events (the response was not streamed)."}),
    el("details", {}, el("summary", {text: "Request"}), el("pre", {class: "json", text: pretty(data.request)})),
    el("details", {}, el("summary", {text: "Response body"}), el("pre", {class: "json", text: pretty(data.response)}))));
}

// The translation ledger: what orgate mapped, approximated or dropped for this response's
// upstream (docs/translation.md names every code).
function translationCard(entries) {
  const dropped = entries.filter((e) => e.kind === "dropped").length;
  return el("section", {class: "card translation"},
    el("h3", {text: `Translation (${entries.length}${dropped ? `, ${dropped} dropped` : ""})`}),
    table(["code", "kind", "side", "path", "detail"], entries.map((e) => el("tr", {class: `kind-${e.kind}`},
      el("td", {}, el("code", {text: e.code})), el("td", {text: e.kind}), el("td", {text: e.side}),
      el("td", {}, el("code", {text: e.path})), el("td", {text: e.detail || ""})))));
}

function reviewAttempts(review) {
  return el("section", {class: "card attempts"},
    el("h3", {}, "Structured-output attempts ", review.id ? el("a", {href: "#/review", text: `review ${review.id}`}) : null,
      ` (${review.status}${review.stage ? `, ${review.stage}` : ""})`),
    table(["#", "finish", "stage", "errors", "max tokens", "raw text"], (review.attempts || []).map((a) => el("tr", {},
      el("td", {text: a.number}), el("td", {text: a.finish_reason || ""}), el("td", {text: a.stage || ""}),
      el("td", {text: (a.errors || []).join("; ")}), el("td", {text: a.max_output_tokens ?? ""}),
      el("td", {}, el("pre", {class: "json", text: a.text || ""}))))));
}

// ---------------------------------------------------------------- router

const PAGES = {traffic: trafficPage};

function registerPage(name, render) {
  PAGES[name] = render;
}

async function route() {
  for (const id of state.timers) window.clearInterval(id);
  state.timers = [];
  const [path, query] = window.location.hash.replace(/^#\/?/, "").split("?");
  const params = new URLSearchParams(query || "");
  const [name, ...rest] = path.split("/");
  const root = clear(document.getElementById("page"));
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.page === name);
  try {
    if (name === "response" && rest.length) await inspectorPage(root, params, decodeURIComponent(rest.join("/")));
    else await (PAGES[name] || trafficPage)(root, params);
  } catch (err) {
    if (!(err instanceof SignedOut)) root.append(errorBox(err.message));
  }
}

async function start() {
  try {
    state.session = await api("/console/api/session");
  } catch {
    return;
  }
  document.querySelector('nav a[data-page="overview"]').hidden = !state.session.admin;
  document.querySelector('nav a[data-page="nodes"]').hidden = !state.session.admin;
  document.getElementById("who").textContent =
    `${state.session.key_name} · ${state.session.admin ? "all tenants (admin)" : `tenant ${state.session.tenant}`}`;
  document.getElementById("signout").addEventListener("click", async () => {
    await api("/console/api/session", {method: "DELETE"}).catch(() => {});
    window.location.reload();
  });
  window.addEventListener("hashchange", route);
  route();
}

window.orgateConsole = {el, clear, api, table, every, errorBox, fmtTime, pretty, registerPage, state, SignedOut, jsonTree, reviewAttempts};
document.addEventListener("DOMContentLoaded", start);
