// Connectors: health, last sync and live sync status (queued → running with counts → succeeded |
// failed with the reason); the syncs started here form this page's history. Document upload.
import { gateway, raw, idempotencyKey } from "../api.js";
import { h, field, form, table, section, badge, when, problemBox } from "../dom.js";
import { isAdmin } from "../shell.js";

const STATUS_KIND = { HEALTHY: "good", SUCCEEDED: "good", FAILING: "bad", FAILED: "bad", DEGRADED: "warn", SYNCING: "warn", RUNNING: "warn", QUEUED: "" };
const status = (s) => badge(s || "—", STATUS_KIND[s] || "");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function syncLine(run) {
  return h("li", { "data-status": run.status }, status(run.status), ` ${run.mode} · queued ${when(run.queued_at)}`,
    run.started_at ? ` · started ${when(run.started_at)}` : "", ` · read ${run.rows_read ?? 0}, written ${run.rows_written ?? 0}, deleted ${run.rows_deleted ?? 0}`,
    run.finished_at ? ` · finished ${when(run.finished_at)}` : "", run.error ? h("span", { class: "error" }, ` · ${run.error}`) : "");
}

export async function watch(connectorId, run, list) {
  let item = syncLine(run);
  list.prepend(item);
  while (run.status === "QUEUED" || run.status === "RUNNING") {
    await sleep(1000);
    if (!item.isConnected) return run;
    run = await gateway(`/v1/connectors/${encodeURIComponent(connectorId)}/syncs/${encodeURIComponent(run.id)}`);
    const next = syncLine(run);
    item.replaceWith(next);
    item = next;
  }
  return run;
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
  const history = h("ul", { class: "steps", id: "sync-history", "aria-live": "polite" });
  if (c.last_sync) history.append(syncLine({ mode: "", queued_at: null, ...c.last_sync }));
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
      out.replaceChildren(h("p", { class: "meta" }, "Sync queued; its status updates below."));
      await watch(params.connector_id, run, history);
    }, field("Mode", mode), h("button", { type: "submit", id: "sync-now" }, "Sync now"))));
  }
  parts.push(section("Sync history", h("p", { class: "note" }, "The last sync, and every sync started on this page while it is open."), history));
  if (c.kind === "documents" && isAdmin(me)) parts.push(section("Upload a document", uploadForm(params.connector_id)));
  view.replaceChildren(...parts);
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
