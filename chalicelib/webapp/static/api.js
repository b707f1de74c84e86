// The page's only way to the platform API and the gateway: same-origin calls to /api/<surface>/...,
// which the app's server forwards with the session's access token (the token never reaches this
// script: see docs/webapp.md, "Token storage"). A 401 refreshes the session once, then retries.
const BASE_HEADERS = { "X-Requested-With": "app" };

export class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

// One refresh at a time, across every tab of the app: the refresh token rotates, and presenting the
// same one twice is treated as theft (the identity service revokes the whole grant, signing the user
// out everywhere). Within a tab concurrent callers share one refresh; across tabs a Web Lock serialises
// them, and a tab that waited first checks whether another tab's refresh already renewed the shared
// session cookie.
const REFRESH_LOCK = "app-session-refresh";
let refreshing = null;

const postRefresh = () => fetch("/session/refresh", { method: "POST", headers: { ...BASE_HEADERS, "Content-Type": "application/json" }, body: "{}" })
  .then((r) => r.ok, () => false);
const sessionValid = () => fetch("/session/claims", { headers: BASE_HEADERS }).then((r) => r.ok, () => false);

export function refreshSession() {
  if (!refreshing) {
    const locked = navigator.locks
      ? navigator.locks.request(REFRESH_LOCK, async () => (await sessionValid()) || postRefresh())
      : postRefresh();
    refreshing = locked.finally(() => { setTimeout(() => { refreshing = null; }, 0); });
  }
  return refreshing;
}

export function signInAgain() {
  const here = location.pathname + location.search;
  location.assign("/session/signin?" + new URLSearchParams({ path: here }));
}

async function problemOf(resp) {
  try { return await resp.json(); } catch { return { title: resp.statusText, detail: `HTTP ${resp.status}`, status: resp.status }; }
}

export async function raw(url, init = {}, retried = false) {
  const resp = await fetch(url, { credentials: "same-origin", ...init, headers: { ...BASE_HEADERS, ...(init.headers || {}) } });
  if (resp.status === 401 && !retried) {
    if (await refreshSession()) return raw(url, init, true);
    signInAgain();
    throw new ApiError(401, { title: "Signed out", detail: "Your session ended; signing you in again." });
  }
  if (!resp.ok) throw new ApiError(resp.status, await problemOf(resp));
  return resp;
}

// Answers the shell's server fetched for this page's first calls (data-prefetched: webapp/prefetch.py),
// keyed by address; each is used once, by the first GET of that address, and later calls ask the API.
let prefetched = null;
function takePrefetched(url) {
  if (prefetched === null) {
    try { prefetched = JSON.parse(document.body.dataset.prefetched || "{}"); } catch { prefetched = {}; }
  }
  if (!Object.prototype.hasOwnProperty.call(prefetched, url)) return undefined;
  const answer = prefetched[url];
  delete prefetched[url];
  return answer;
}

export async function call(surface, path, { method = "GET", body, query, headers = {}, stream = false, signal } = {}) {
  const q = query ? "?" + new URLSearchParams(Object.entries(query).filter(([, v]) => v !== "" && v !== null && v !== undefined)) : "";
  const url = `/api/${surface}${path}${q === "?" ? "" : q}`;
  if (method === "GET" && !stream && body === undefined) {
    const known = takePrefetched(url);
    if (known !== undefined) return known;
  }
  const init = { method, headers: { ...headers } };
  if (signal) init.signal = signal;
  if (body !== undefined) { init.body = JSON.stringify(body); init.headers["Content-Type"] = "application/json"; }
  if (stream) init.headers.Accept = "text/event-stream";
  const resp = await raw(url, init);
  if (stream) return resp;
  if (resp.status === 204) return null;
  const type = resp.headers.get("Content-Type") || "";
  return type.includes("json") ? resp.json() : resp.text();
}

export const platform = (path, opts) => call("platform", path, opts);
export const gateway = (path, opts) => call("gateway", path, opts);

// Server-sent events from a fetch() response (works for POST, unlike EventSource).
export async function* events(resp) {
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (value) buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
      const ev = { event: "message", data: "", id: null };
      for (const line of block.split(/\r?\n/)) {
        const [k, ...rest] = line.split(":");
        const v = rest.join(":").replace(/^ /, "");
        if (k === "event") ev.event = v;
        else if (k === "data") ev.data += (ev.data ? "\n" : "") + v;
        else if (k === "id") ev.id = v;
        else if (k === "retry" && /^[0-9]+$/.test(v)) ev.retry = Number(v);
      }
      if (ev.data) { try { ev.json = JSON.parse(ev.data); } catch { ev.json = null; } }
      if (ev.data || ev.event !== "message" || ev.retry !== undefined) yield ev;
    }
    if (done) return;
  }
}

export async function sessionCall(path, body) {
  const resp = await raw(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body || {}) });
  return resp.json();
}

export async function claims() {
  return (await raw("/session/claims")).json();
}

export const idempotencyKey = () => crypto.randomUUID();

// "Not built on this deployment yet": a 404/405 on a whole API family (chat, agents, usage...).
// An API route this deployment does not have: API Gateway (and chalice local) answer 403 with a bare
// {"message": ...} ("Missing Authentication Token", or an "Authorization header requires..." text when
// a Bearer token was sent), never the platform's problem+json with a code.
export const missing = (err) => err instanceof ApiError && err.status === 403 && !!err.problem
  && typeof err.problem.message === "string" && !err.problem.code;
