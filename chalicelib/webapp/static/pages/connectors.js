// Connectors: health, the sync history (GET /v1/connectors/{id}/syncs) and a live sync status
// (queued → running with progress counts → succeeded | failed with the reason). Document upload.
import { gateway, raw, idempotencyKey } from "../api.js";
import { h, field, form, table, section, badge, when, action, problemBox } from "../dom.js";
import { isAdmin } from "../shell.js";

const STATUS_KIND = { HEALTHY: "good", SUCCEEDED: "good", FAILING: "bad", FAILED: "bad", DEGRADED: "warn", SYNCING: "warn", RUNNING: "warn", RETRYING: "warn", QUEUED: "" };
const status = (s) => badge(s || "—", STATUS_KIND[s] || "");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const LIVE = new Set(["QUEUED", "RUNNING", "RETRYING"]);
const HISTORY_PAGE = 20;

// One sync run in words: queued → running with progress counts → succeeded | failed with the reason.
function progress(run) {
  const counts = `${run.rows_read ?? 0} rows read${run.objects_read ? ` (${run.objects_read} objects)` : ""}, ${run.rows_written ?? 0} written, ${run.rows_deleted ?? 0} deleted`;
  if (run.status === "QUEUED") return "waiting for a worker";
  if (run.status === "RUNNING") return `running: ${counts} so far`;
  if (run.status === "RETRYING") return `attempt ${run.attempts ?? 1} failed, retrying: ${counts} so far`;
  return counts;
}

function syncLine(run) {
  return h("li", { "data-status": run.status, "data-sync": run.id || "" }, status(run.status),
    ` ${run.mode || ""} · ${progress(run)}`,
    run.queued_at ? ` · queued ${when(run.queued_at)}` : "", run.started_at ? ` · started ${when(run.started_at)}` : "",
    run.finished_at ? ` · finished ${when(run.finished_at)}` : "",
    run.error ? h("span", { class: "error sync-error" }, ` · ${run.status === "FAILED" ? "failed: " : ""}${run.error}`) : "");
}

// Follow a queued or running sync until it ends, replacing its line in place (the list is aria-live).
export async function watch(connectorId, run, list, { prepend = true, existing = null } = {}) {
  let item = existing || syncLine(run);
  if (!existing) { if (prepend) list.prepend(item); else list.append(item); }
  while (LIVE.has(run.status)) {
    await sleep(1000);
    if (!item.isConnected) return run;
    run = await gateway(`/v1/connectors/${encodeURIComponent(connectorId)}/syncs/${encodeURIComponent(run.id)}`);
    const next = syncLine(run);
    item.replaceWith(next);
    item = next;
  }
  return run;
}

// The connector's sync history from GET /v1/connectors/{id}/syncs (newest first, paged); runs still
// queued or running are followed live.
async function history(connectorId, list, more, after = "") {
  const page = await gateway(`/v1/connectors/${encodeURIComponent(connectorId)}/syncs`, { query: { limit: HISTORY_PAGE, after } });
  const empty = list.querySelector(".empty-item");
  if (empty && page.syncs.length) empty.remove();
  for (const run of page.syncs) {
    if (list.querySelector(`li[data-sync="${CSS.escape(run.id)}"]`)) continue;
    const item = syncLine(run);
    list.append(item);
    if (LIVE.has(run.status)) watch(connectorId, run, list, { existing: item }).catch(() => {});
  }
  more.replaceChildren(page.has_more ? action("Older syncs", () => history(connectorId, list, more, page.next_cursor), { class: "small secondary", id: "older-syncs" }) : "");
}

export async function render(ctx) {
  if (ctx.name === "connector") return renderOne(ctx);
  const { view } = ctx;
  const page = await gateway("/v1/connectors");
  view.replaceChildren(h("h1", {}, "Connectors"), section("Sources",
    table("Connectors", ["Name", "Kind", "Status", "Last checked", "Last sync", "Dataset"], page.connectors.map((c) => [
      h("a", { href: `/knowledge/connectors/${encodeURIComponent(c.id)}` }, c.name), `${c.kind} (${c.category})`, status(c.status),
      c.health ? [when(c.health.last_checked_at), c.health.last_error ? h("div", { class: "error" }, c.health.last_error) : null] : "—",
      c.last_sync ? [status(c.last_sync.status), " ", when(c.last_sync.finished_at)] : "never",
      c.dataset && c.dataset.id ? h("a", { href: `/knowledge/datasets/${encodeURIComponent(c.dataset.id)}` }, c.dataset.name || c.dataset.id) : "—"]),
    "No connectors yet.")));
}

async function renderOne({ view, params, me }) {
  const id = encodeURIComponent(params.connector_id);
  const c = await gateway(`/v1/connectors/${id}`);
  const list = h("ul", { class: "steps", id: "sync-history", "aria-live": "polite" },
    h("li", { class: "empty-item" }, "No sync has run yet."));
  const more = h("div", { class: "pager" });
  const parts = [h("h1", {}, c.name), section("Health",
    h("dl", { class: "facts" }, h("dt", {}, "Status"), h("dd", {}, status(c.status)),
      h("dt", {}, "Kind"), h("dd", {}, `${c.kind} (${c.category})`),
      h("dt", {}, "Last checked"), h("dd", {}, when(c.health && c.health.last_checked_at)),
      h("dt", {}, "Last error"), h("dd", {}, (c.health && c.health.last_error) || "none"),
      h("dt", {}, "Description"), h("dd", {}, c.description || "—")))];
  if (isAdmin(me)) {
    const mode = h("select", { name: "mode" }, h("option", { value: "INCREMENTAL" }, "Incremental"), h("option", { value: "FULL_REFRESH" }, "Full refresh"));
    parts.push(section("Sync", form(async (data, out) => {
      const run = await gateway(`/v1/connectors/${id}/sync`, { method: "POST", headers: { "Idempotency-Key": idempotencyKey() }, body: { mode: data.get("mode") } });
      out.replaceChildren(h("p", { class: "meta" }, "Sync queued; its status updates in the history below."));
      const empty = list.querySelector(".empty-item");
      if (empty) empty.remove();
      const done = await watch(params.connector_id, run, list);
      out.replaceChildren(h("p", { class: done.status === "SUCCEEDED" ? "ok" : "error", id: "sync-result" },
        done.status === "SUCCEEDED" ? `Sync succeeded: ${progress(done)}.` : `Sync ${done.status.toLowerCase()}: ${done.error || "no reason given"}.`));
    }, field("Mode", mode), h("button", { type: "submit", id: "sync-now" }, "Sync now"))));
  }
  parts.push(section("Sync history", h("p", { class: "note" }, "Newest first; a sync still queued or running updates here live."), list, more));
  if (c.kind === "documents" && isAdmin(me)) parts.push(section("Upload a document", uploadForm(params.connector_id)));
  view.replaceChildren(...parts);
  try {
    await history(params.connector_id, list, more);
  } catch (err) {
    if (c.last_sync) { list.replaceChildren(syncLine({ mode: "", ...c.last_sync })); } // a deployment without the history call
    more.replaceChildren(problemBox(err));
  }
}

function uploadForm(connectorId) {
  const file = h("input", { type: "file", name: "file", accept: ".txt,.md,.csv,.json,.html,.pdf" });
  return form(async (_data, out) => {
    const chosen = file.files[0];
    if (!chosen) throw new Error("Choose a file first.");
    const resp = await raw(`/api/upload/${encodeURIComponent(connectorId)}`, { method: "POST",
      headers: { "Content-Type": "application/octet-stream", "X-File-Name": chosen.name, "X-File-Type": chosen.type || "application/octet-stream" },
      body: chosen });
    const doc = await resp.json();
    out.replaceChildren(h("p", { class: "ok" }, `Uploaded ${doc.file_name} as ${doc.document_id}. It is indexed by the next sync.`));
  }, field("Document (up to 5 MiB)", file), h("button", { type: "submit" }, "Upload"));
}
