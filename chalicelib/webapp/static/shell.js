// The frame around every page: workspace switcher (token exchange through the app's server),
// account menu with sign-out (which also ends the identity service's session), and the navigation.
import { platform, sessionCall, ApiError } from "./api.js";
import { h, field } from "./dom.js";

const NAV = [
  ["/", "Overview", null],
  ["/chat", "Chat", "member"],
  ["/knowledge", "Knowledge", null],
  ["/knowledge/query", "Query", "member"],
  ["/knowledge/connectors", "Connectors", null],
  ["/agents", "Agents", null],
  ["/members", "Members", "admin"],
  ["/audit", "Audit", "audit"],
  ["/settings", "Settings", "admin"],
  ["/models", "Models", "admin"],
];

export const isAdmin = (me) => (me.roles || []).includes("admin");
export function allowed(me, need) {
  const roles = me.roles || [];
  if (!need) return !!me.workspace_id;
  if (need === "admin") return roles.includes("admin");
  if (need === "audit") return roles.includes("admin") || roles.includes("viewer");
  if (need === "member") return roles.includes("admin") || roles.includes("member");
  return false;
}

export async function loadWorkspaces() {
  try {
    const page = await platform("/v1/workspaces", { query: { limit: 200 } });
    return page.workspaces || [];
  } catch (err) {
    if (err instanceof ApiError) return [];
    throw err;
  }
}

export async function switchWorkspace(workspaceId) {
  await sessionCall("/session/workspace", { workspace_id: workspaceId });
}

export function renderHeader(me, workspaces, authUrl) {
  const top = document.getElementById("top");
  const select = h("select", { id: "ws-switch", name: "workspace" },
    me.workspace_id ? null : h("option", { value: "", selected: true }, "No workspace yet"),
    workspaces.map((w) => h("option", { value: w.id, selected: w.id === me.workspace_id },
      `${w.name} · ${w.residency}${w.role ? " · " + w.role : ""}`)));
  const status = h("span", { class: "switch-status", role: "status" });
  select.addEventListener("change", async () => {
    if (!select.value) return;
    select.disabled = true;
    status.textContent = "Switching…";
    try {
      await switchWorkspace(select.value);
      location.assign("/");
    } catch (err) {
      status.textContent = err.problem && err.problem.code === "mfa_required"
        ? "That workspace requires multi-factor authentication: add a second factor in your security settings and sign in again."
        : `Could not switch: ${err.message}`;
      select.disabled = false;
    }
  });
  const signout = h("button", { type: "button", id: "signout", class: "secondary small" }, "Sign out");
  signout.addEventListener("click", async () => {
    signout.disabled = true;
    const out = await sessionCall("/session/signout", {});
    location.assign(out.redirect_to);
  });
  top.replaceChildren(
    h("a", { class: "brand", href: "/" }, "AI Platform"),
    h("div", { class: "switcher" }, field("Workspace", select), status,
      h("a", { href: "/workspaces/new", class: "new-ws" }, "New workspace")),
    h("div", { class: "account" },
      h("span", { id: "who", class: "who" }, me.email || ""),
      h("a", { href: authUrl + "/account" }, "Security settings"), signout));
}

export function renderNav(me) {
  const nav = document.getElementById("nav");
  const links = NAV.filter(([, , need]) => need === null ? true : allowed(me, need))
    .filter(([href]) => me.workspace_id || href === "/");
  nav.replaceChildren(h("ul", {}, links.map(([href, label]) => h("li", {}, h("a", { href, "data-nav": href }, label)))));
  markCurrent();
}

export function markCurrent() {
  const here = location.pathname;
  let best = null;
  for (const a of document.querySelectorAll("#nav a")) {
    const href = a.getAttribute("data-nav");
    a.removeAttribute("aria-current");
    if (here === href || (href !== "/" && here.startsWith(href + "/"))) {
      if (!best || href.length > best.getAttribute("data-nav").length) best = a;
    }
  }
  if (best) best.setAttribute("aria-current", "page");
}
