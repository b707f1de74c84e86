// Audit trail (Admin, Viewer): filters, pages, correlation IDs; export (Admin) verified and downloadable.
import { platform } from "../api.js";
import { h, field, form, table, section, when, problemBox, loading, badge } from "../dom.js";
import { isAdmin } from "../shell.js";

// What an event acted on, by name when the event names it (the id stays in the tooltip).
function targetName(e) {
  const t = e.target || {};
  const d = e.details || {};
  const name = t.name || t.email || d.name || d.email || d.file_name || d.dataset_name || d.title;
  const kind = (t.type || "").replace(/_/g, " ");
  if (!t.type && !t.id) return "";
  return h("span", { title: t.id || "" }, name ? `${kind} ${name}` : `${kind} (${String(t.id || "").slice(-6) || "unnamed"})`);
}

const iso = (local) => (local ? new Date(local).toISOString() : "");

export async function render({ view, me, query, navigate }) {
  const filters = { from: query.get("from") || "", to: query.get("to") || "", action: query.get("action") || "", actor: query.get("actor") || "" };
  const list = h("div", {}, loading());
  const cursors = [""];

  async function draw(after) {
    list.replaceChildren(loading());
    try {
      const page = await platform("/v1/audit/events", { query: { ...filters, order: "newest", limit: 50, after } });
      const pager = h("div", { class: "pager" },
        cursors.length > 1 ? h("button", { type: "button", class: "secondary", onclick: () => { cursors.pop(); draw(cursors[cursors.length - 1]); } }, "Newer events") : null,
        page.has_more ? h("button", { type: "button", class: "secondary", id: "next-page", onclick: () => { cursors.push(page.next_cursor); draw(page.next_cursor); } }, "Older events") : null);
      list.replaceChildren(table("Audit events", ["#", "When", "Actor", "Action", "Target", "Correlation ID"], page.events.map((e) => [
        String(e.seq), when(e.occurred_at), e.actor ? (e.actor.email || e.actor.id) : "", h("code", {}, e.action),
        targetName(e), h("code", { class: "cid" }, e.correlation_id)]), "No events match these filters."), pager);
    } catch (err) { list.replaceChildren(problemBox(err)); }
  }

  const inputs = {
    from: h("input", { type: "datetime-local", name: "from" }), to: h("input", { type: "datetime-local", name: "to" }),
    action: h("input", { name: "action", value: filters.action, placeholder: "member.* or invitation.created" }),
    actor: h("input", { name: "actor", value: filters.actor, placeholder: "usr_… or e-mail" }),
  };
  const filterForm = form(async (data) => {
    const q = new URLSearchParams(Object.entries({ from: iso(data.get("from")), to: iso(data.get("to")), action: data.get("action"), actor: data.get("actor") }).filter(([, v]) => v));
    await navigate("/audit" + (q.toString() ? "?" + q : ""));
  }, h("div", { class: "row" }, field("From", inputs.from), field("To", inputs.to), field("Action", inputs.action), field("Actor", inputs.actor)),
  h("button", { type: "submit" }, "Filter"));

  const parts = [h("h1", {}, "Audit trail"), section("Filter", filterForm)];
  if (isAdmin(me)) parts.push(section("Export", exportForm()));
  parts.push(section("Events", h("p", { class: "note" }, "Newest first; each event names what it acted on (its id in the tooltip)."), list));
  view.replaceChildren(...parts);
  await draw("");
}

// The export job writes and signs the export; until then its address answers 404.
async function exportWhenReady(id) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await platform(`/v1/audit/exports/${encodeURIComponent(id)}`);
    } catch (err) {
      if (attempt >= 60 || !err || err.status !== 404) throw err;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

function exportForm() {
  const from = h("input", { type: "datetime-local", name: "from" });
  const to = h("input", { type: "datetime-local", name: "to" });
  return form(async (data, status) => {
    status.replaceChildren(h("p", { class: "loading" }, "Exporting…"));
    const body = {};
    if (data.get("from")) body.from = iso(data.get("from"));
    if (data.get("to")) body.to = iso(data.get("to"));
    const exp = await platform("/v1/audit/exports", { method: "POST", body });
    status.replaceChildren(h("p", {}, `Exporting ${exp.count} events (seq ${exp.first_seq}–${exp.last_seq}) to `, h("code", {}, exp.uri), ". Waiting for the signed export…"));
    const checked = await exportWhenReady(exp.id);
    const v = checked.verification || {};
    status.replaceChildren(h("div", { id: "export-result" },
      h("p", {}, v.ok ? badge("Verified", "good") : badge("Verification failed", "bad"), " ",
        `${v.count ?? checked.count} events; the signed digest, the events' SHA-256 and the hash chain were checked.`),
      v.problems && v.problems.length ? h("ul", { class: "error" }, v.problems.map((p) => h("li", {}, p))) : null,
      h("details", {}, h("summary", {}, "Checks"), h("ul", {}, (v.checks || []).map((c) => h("li", {}, c)))),
      h("p", {}, h("a", { class: "button secondary", id: "export-download", href: checked.download_url, download: "" }, "Download events.jsonl"),
        h("span", { class: "meta" }, ` Link valid until ${when(checked.download_expires_at)}. Object Lock: ${exp.object_lock ? exp.object_lock.mode + " until " + when(exp.object_lock.retain_until) : "—"}.`))));
  }, h("p", { class: "note" }, "Exports a time range (empty: everything) as JSON Lines with a KMS-signed digest, kept under Object Lock for seven years."),
  h("div", { class: "row" }, field("From", from), field("To", to)), h("button", { type: "submit", id: "export" }, "Export and verify"));
}
