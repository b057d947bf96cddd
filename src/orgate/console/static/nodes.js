// Nodes: every orgate process serving the store (each machine, or each worker of one), with its
// health (up: heartbeat within 30 s; silent: taken for dead; stopped: drained), version, address,
// the background responses it holds and its traffic. Refreshed every five seconds while open.
"use strict";
(() => {
  const {el, api, registerPage, every, errorBox, table, fmtTime, state} = window.orgateConsole;

  function ago(seconds, now) {
    if (!seconds) return "";
    const s = Math.max(0, Math.round(now - seconds));
    return s < 120 ? `${s} s ago` : s < 7200 ? `${Math.round(s / 60)} min ago` : `${Math.round(s / 3600)} h ago`;
  }

  function row(node, now) {
    const name = node.this ? `${node.host} (this node)` : node.host;
    return el("tr", {class: `node ${node.status}`, "data-node": node.id},
      el("td", {}, el("span", {class: `badge ${node.status}`, text: node.status})),
      el("td", {text: name}),
      el("td", {class: "num", text: node.pid}),
      el("td", {text: node.address || ""}),
      el("td", {text: node.version || ""}),
      el("td", {text: fmtTime(node.started_at)}),
      el("td", {text: ago(node.stopped_at || node.heartbeat_at, now)}),
      el("td", {class: "num", text: node.background}),
      el("td", {class: "num", text: node.requests}),
      el("td", {class: "num", text: node.errors}));
  }

  function nodesPage(root) {
    if (!state.session.admin) {
      root.append(el("h2", {text: "Nodes"}), el("p", {class: "muted", id: "nodes-admin-only",
        text: "The node list shows every tenant's traffic: sign in with an admin key (admin = true in [auth])."}));
      return;
    }
    const body = el("div", {id: "nodes"});
    root.append(el("h2", {text: "Nodes"}), body);
    const draw = async () => {
      try {
        const listed = await api("/console/api/nodes");
        const now = Date.now() / 1000;
        if (!listed.store) {
          body.replaceChildren(el("p", {class: "muted", text: "This server runs without a store: it is the only node."}));
          return;
        }
        const up = listed.data.filter((n) => n.status === "up").length;
        body.replaceChildren(
          el("p", {class: "muted", id: "nodes-summary", text: `${up} of ${listed.data.length} up (processes of the last hour sharing this store)`}),
          table(["health", "host", "pid", "address", "version", "started", "last heard", "background", "requests", "errors"],
            listed.data.map((node) => row(node, now))));
      } catch (err) {
        body.replaceChildren(errorBox(err.message));
        throw err;
      }
    };
    draw().then(() => every(5000, () => draw().catch(() => {})), () => {});
  }

  registerPage("nodes", nodesPage);
})();
