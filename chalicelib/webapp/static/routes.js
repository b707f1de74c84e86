// Every page address of the app, one source of truth: the server reads these patterns too
// (chalicelib/webapp/pages.py) to answer 404 for anything else.
export const ROUTES = [
  ["/", "home"],
  ["/workspaces/new", "workspace_new"],
  ["/chat", "chat"],
  ["/chat/:chat_id", "chat"],
  ["/knowledge", "catalog"],
  ["/knowledge/datasets/:dataset_id", "dataset"],
  ["/knowledge/query", "query"],
  ["/knowledge/connectors", "connectors"],
  ["/knowledge/connectors/:connector_id", "connector"],
  ["/agents", "agents"],
  ["/agents/new", "agent_edit"],
  ["/agents/:agent_id", "agent"],
  ["/agents/:agent_id/edit", "agent_edit"],
  ["/agents/:agent_id/runs/:run_id", "run"],
  ["/members", "members"],
  ["/invitations/accept", "accept"],
  ["/audit", "audit"],
  ["/settings", "settings"],
  ["/models", "models"],
  ["/signed-out", "signed_out"],
];

export function match(pathname) {
  const path = pathname !== "/" && pathname.endsWith("/") ? pathname.slice(0, -1) : pathname;
  for (const [pattern, name] of ROUTES) {
    const keys = [];
    const re = new RegExp("^" + pattern.replace(/:([a-z_]+)/g, (_, k) => { keys.push(k); return "([^/]+)"; }) + "$");
    const m = re.exec(path);
    if (m && !(pattern === "/agents/:agent_id" && m[1] === "new")) {
      return { name, params: Object.fromEntries(keys.map((k, i) => [k, decodeURIComponent(m[i + 1])])) };
    }
  }
  return null;
}
