// Small DOM helpers: every page builds its markup with h()/svg(), never with innerHTML, so values
// from the API are always text (no HTML injection) and no inline style or script is ever created.
const SVG_NS = "http://www.w3.org/2000/svg";

function build(el, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "text") el.textContent = String(value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export const h = (tag, attrs, ...children) => build(document.createElement(tag), attrs, children);
export const svg = (tag, attrs, ...children) => build(document.createElementNS(SVG_NS, tag), attrs, children);

let uid = 0;
export const nextId = (prefix) => `${prefix}-${++uid}`;

export const loading = (what = "Loading…") => h("p", { class: "loading", role: "status" }, what);
export const empty = (text) => h("p", { class: "empty" }, text);

export function problemBox(err) {
  const p = err && err.problem ? err.problem : null;
  return h("div", { class: "problem", role: "alert" },
    h("p", { class: "error" }, p ? (p.title || "Error") + ": " + (p.detail || "") : String(err && err.message || err)),
    p && p.errors ? h("ul", {}, p.errors.map((e) => h("li", {}, `${e.field}: ${e.message}`))) : null,
    p ? h("p", { class: "meta" }, `code ${p.code || "?"} · correlation id `, h("code", {}, p.correlation_id || "-")) : null);
}

// A labelled control: returns [wrapper, control].
export function field(label, control, hint) {
  const id = control.id || nextId("f");
  control.id = id;
  const hintEl = hint ? h("p", { class: "hint", id: id + "-hint" }, hint) : null;
  if (hintEl) control.setAttribute("aria-describedby", hintEl.id);
  if (control.type === "checkbox") {
    return h("div", { class: "field check" }, control, h("label", { for: id }, label), hintEl);
  }
  return h("div", { class: "field" }, h("label", { for: id }, label), control, hintEl);
}

export function table(caption, headers, rows, emptyText = "Nothing here yet.") {
  if (!rows.length) return empty(emptyText);
  return h("div", { class: "table-wrap", role: "region", "aria-label": caption, tabindex: "0" },
    h("table", {}, h("caption", {}, caption),
      h("thead", {}, h("tr", {}, headers.map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, c)))))));
}

export function section(title, ...children) {
  const id = nextId("sec");
  return h("section", { "aria-labelledby": id }, h("h2", { id }, title), ...children);
}

export function badge(text, kind = "") {
  return h("span", { class: `badge ${kind}`.trim() }, text);
}

// Every date the app shows, in one unambiguous English form in the browser's time zone: "29 Nov 2026,
// 14:05" (docs/decisions.md). Built from the date's own fields: the first Intl formatter a page creates
// loads the locale data, 15-30 ms of a page's start in Chromium on this machine.
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const two = (n) => String(n).padStart(2, "0");
export const when = (iso) => {
  if (!iso) return "—";
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return String(iso);
  return `${at.getDate()} ${MONTHS[at.getMonth()]} ${at.getFullYear()}, ${two(at.getHours())}:${two(at.getMinutes())}`;
};

// An ISO 8601 duration in words: PT2M31S -> "2 min 31 s", P30D -> "30 days".
export function humanDuration(iso) {
  const m = /^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$/.exec(String(iso || ""));
  if (!m || !iso || iso === "P" || iso === "PT") return iso ? String(iso) : "none";
  const [, d, hh, mm, ss] = m;
  const parts = [];
  if (d) parts.push(`${Number(d)} day${Number(d) === 1 ? "" : "s"}`);
  if (hh) parts.push(`${Number(hh)} h`);
  if (mm) parts.push(`${Number(mm)} min`);
  if (ss) parts.push(`${Math.round(Number(ss))} s`);
  return parts.join(" ") || "0 s";
}

const live = () => document.getElementById("live");
export function announce(text) {
  const el = live();
  if (el) { el.textContent = ""; setTimeout(() => { el.textContent = text; }, 30); }
}

// A button that disables itself while its async action runs and shows the action's error next to it.
export function action(label, run, attrs = {}) {
  const out = h("span", { class: "action-result", role: "status" });
  const btn = h("button", { type: "button", ...attrs }, label);
  btn.addEventListener("click", async () => {
    btn.disabled = true;
    out.replaceChildren();
    try { await run(out); } catch (err) { out.replaceChildren(problemBox(err)); } finally { btn.disabled = false; }
  });
  return h("span", { class: "action" }, btn, out);
}

export function form(onSubmit, ...children) {
  const status = h("div", { class: "form-status", role: "status" });
  const el = h("form", { novalidate: true }, ...children, status);
  el.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const submit = el.querySelector("button[type=submit]");
    if (submit) submit.disabled = true;
    status.replaceChildren();
    try { await onSubmit(new FormData(el), status); } catch (err) { status.replaceChildren(problemBox(err)); }
    finally { if (submit) submit.disabled = false; }
  });
  return el;
}
