// Boot: who is signed in, the frame, then the page for the address; links inside the app navigate
// without a reload, and each page module is loaded when first needed. The shell starts the app with
// its page's module already in hand (start(), called by /static/start/{page}.js: webapp/pages.py), so
// the first page renders without waiting for a dynamic import.
import { claims, ApiError } from "./api.js";
import { h, problemBox } from "./dom.js";
import { match } from "./routes.js";
import { loadWorkspaces, renderHeader, renderNav, markCurrent, allowed } from "./shell.js";

const PAGES = {
  home: () => import("./pages/home.js"), workspace_new: () => import("./pages/workspace_new.js"),
  chat: () => import("./pages/chat.js"), catalog: () => import("./pages/catalog.js"),
  dataset: () => import("./pages/dataset.js"), query: () => import("./pages/query.js"),
  connectors: () => import("./pages/connectors.js"), connector: () => import("./pages/connectors.js"),
  agents: () => import("./pages/agents.js"), agent: () => import("./pages/agents.js"),
  agent_edit: () => import("./pages/agents.js"), run: () => import("./pages/agents.js"),
  members: () => import("./pages/members.js"), accept: () => import("./pages/accept.js"),
  audit: () => import("./pages/audit.js"), settings: () => import("./pages/settings.js"),
  models: () => import("./pages/models.js"),
};

// Pages only some roles may use (the navigation hides them; an address typed by hand gets a page that
// says so instead of forms full of refusals).
const NEEDS = { members: "admin", settings: "admin", audit: "audit", chat: "member", query: "member", agent_edit: "member" };
const NEED_WORDS = { admin: ["Admins only", "This page is for the workspace's Admins."],
  audit: ["Admins and Viewers only", "The audit trail is for the workspace's Admins and Viewers."],
  member: ["Members and Admins only", "This page is for the workspace's Members and Admins; Viewers read."] };

function refused(main, need) {
  const [title, why] = NEED_WORDS[need];
  const roles = (state.me.roles || []).join(", ") || "no role";
  main.replaceChildren(h("h1", { id: "role-refused" }, title),
    h("p", {}, `${why} You are signed in as ${state.me.email || "this account"} with the role ${roles} here; an Admin can change your role on the Members page.`),
    h("p", {}, h("a", { class: "button", href: "/" }, "Go to the overview")));
  document.title = `${title} · AI Platform`;
}

const state = { me: null, workspaces: [], authUrl: document.body.dataset.authUrl || "" };
let generation = 0;
// The frame's workspace list as it loads at start: the first page may read it instead of asking again
// (the overview finds its workspace there); pages rendered later ask the API, so they see changes.
let listed = null;

function notFound(main) {
  document.title = "Page not found · AI Platform";
  main.replaceChildren(h("h1", {}, "Page not found"),
    h("p", {}, "There is no page at this address. It may have moved, or the link may be mistyped."),
    h("p", {}, h("a", { class: "button", href: "/" }, "Go to the overview")));
}

export async function render() {
  const mine = ++generation;
  const main = document.getElementById("main");
  main.setAttribute("aria-busy", "true");
  markCurrent();
  const found = match(location.pathname);
  try {
    if (!found || !PAGES[found.name]) {
      notFound(main);
    } else if (NEEDS[found.name] && state.me && state.me.workspace_id && !allowed(state.me, NEEDS[found.name])) {
      refused(main, NEEDS[found.name]);
    } else {
      const mod = found.name === first.name && first.module ? first.module : await PAGES[found.name]();
      const view = h("div", { class: "page" }, h("p", { class: "loading", role: "status" }, "Loading…"));
      main.replaceChildren(view);
      const frameList = listed;
      listed = null;
      await mod.render({ name: found.name, view, params: found.params, query: new URLSearchParams(location.search),
        me: state.me, workspaces: state.workspaces, listed: frameList, authUrl: state.authUrl, navigate, reloadFrame });
      const title = view.querySelector("h1");
      document.title = (title ? title.textContent + " · " : "") + "AI Platform";
    }
  } catch (err) {
    if (mine !== generation) return;
    main.replaceChildren(h("h1", {}, "Something went wrong"), problemBox(err),
      h("p", {}, h("a", { href: location.pathname + location.search }, "Try again")));
  }
  if (mine !== generation) return;
  main.setAttribute("aria-busy", "false");
  const heading = main.querySelector("h1");
  if (heading && navigated) { heading.setAttribute("tabindex", "-1"); heading.focus(); }
}

let navigated = false;
const first = { name: "", module: null }; // the page the app started on, and its module (start())
export function navigate(href, { replace = false } = {}) {
  navigated = true;
  if (replace) history.replaceState(null, "", href); else history.pushState(null, "", href);
  window.scrollTo(0, 0);
  return render();
}

async function reloadFrame() {
  [state.me, state.workspaces] = await Promise.all([loadMe(), loadWorkspaces()]);
  renderHeader(state.me, state.workspaces, state.authUrl);
  renderNav(state.me);
}

const toMe = (c) => ({ user_id: c.sub, email: c.email, workspace_id: c.workspace_id || "", roles: c.roles || [], amr: c.amr || [] });
const loadMe = async () => toMe(await claims());

// The session's claims as the server that served this shell verified them (the same ones /session/claims
// answers): the page starts at once instead of after a round trip; without them, that call.
function shellMe() {
  try { return document.body.dataset.claims ? toMe(JSON.parse(document.body.dataset.claims)) : null; } catch { return null; }
}

document.addEventListener("click", (ev) => {
  const a = ev.target.closest && ev.target.closest("a[href]");
  if (!a || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || a.target || a.hasAttribute("download")) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || /^\/(session|static|api|callback)(\/|$)/.test(url.pathname)) return;
  ev.preventDefault();
  navigate(url.pathname + url.search);
});
window.addEventListener("popstate", () => { navigated = true; render(); });

export async function start(name, module) {
  [first.name, first.module] = [name, module];
  document.body.append(h("div", { id: "live", class: "sr-only", "aria-live": "polite" }));
  // The page renders while the frame's workspace list loads (only the overview without a workspace,
  // which lists them, waits for it); with the shell's claims nothing waits for a session call first.
  let frame;
  let page = null;
  const me = shellMe();
  if (me) {
    state.me = me;
    renderNav(me);
    listed = loadWorkspaces();
    frame = listed.then((list) => { state.workspaces = list; renderHeader(state.me, list, state.authUrl); });
    if (me.workspace_id) page = render();
  } else {
    frame = reloadFrame();
  }
  const [started] = await Promise.allSettled([frame, page]);
  if (started.status === "rejected") {
    const err = started.reason;
    if (err instanceof ApiError && err.status === 401) return; // signInAgain() is taking the browser to sign-in
    // every other failure ends in a ready state too: an error page that says what failed and how to retry
    const main = document.getElementById("main");
    main.replaceChildren(h("h1", {}, "The app could not start"), problemBox(err),
      h("p", {}, h("a", { class: "button", href: location.pathname + location.search }, "Try again")));
    main.setAttribute("aria-busy", "false");
    document.body.dataset.state = "error";
    document.body.dataset.ready = "true";
    return;
  }
  if (!page) await render();
  document.body.dataset.ready = "true";
  performance.mark("app-interactive"); // read by bench/bench_webapp.py
}
