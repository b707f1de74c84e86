// Connectors: add one of every kind (with the role-grant step for AWS sources), edit, check access,
// pause, resume, delete; health explained; the sync history (GET /v1/connectors/{id}/syncs) and a live
// sync status (queued → running with progress counts → succeeded | failed with the reason, files that
// could not be indexed named with the reason); documents uploaded by drag and drop.
import { gateway, idempotencyKey } from "../api.js";
import { h, field, form, table, section, badge, when, action, problemBox, announce } from "../dom.js";
import { isAdmin } from "../shell.js";
import { KIND_NAME, configFields, configFrom, roleGrant, explain, kindPicker, helpSection } from "../connector_forms.js";
import { dropZone } from "../uploads.js";

const STATUS_WORDS = { HEALTHY: "healthy", FAILING: "failing", DEGRADED: "degraded", SYNCING: "syncing", PAUSED: "paused",
  SUCCEEDED: "succeeded", FAILED: "failed", RUNNING: "running", RETRYING: "retrying", QUEUED: "queued" };
const STATUS_KIND = { HEALTHY: "good", SUCCEEDED: "good", FAILING: "bad", FAILED: "bad", DEGRADED: "warn", SYNCING: "warn", RUNNING: "warn", RETRYING: "warn", QUEUED: "" };
const status = (s) => badge(STATUS_WORDS[s] || s || "unknown", STATUS_KIND[s] || "");
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

const MODE_WORDS = { INCREMENTAL: "incremental", FULL_REFRESH: "full refresh" };

function syncLine(run) {
  const skipped = run.skipped || [];
  return h("li", { "data-status": run.status, "data-sync": run.id || "" }, status(run.status),
    ` ${MODE_WORDS[run.mode] || ""}${run.mode ? " · " : ""}${progress(run)}`,
    run.queued_at ? ` · queued ${when(run.queued_at)}` : "", run.started_at ? ` · started ${when(run.started_at)}` : "",
    run.finished_at ? ` · finished ${when(run.finished_at)}` : "",
    run.error ? h("span", { class: "error sync-error" }, ` · ${run.status === "FAILED" ? "failed: " : ""}${run.error}`) : "",
    skipped.length ? h("details", { class: "skipped" }, h("summary", {}, `${skipped.length} file${skipped.length > 1 ? "s" : ""} not indexed`),
      h("ul", {}, skipped.map((s) => h("li", {}, s)))) : "");
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
  const { view, me } = ctx;
  const page = await gateway("/v1/connectors");
  const admin = isAdmin(me);
  const parts = [h("h1", {}, "Connectors"), section("Sources",
    table("Connectors", ["Name", "Kind", "Status", "Last checked", "Last sync", "Dataset"], page.connectors.map((c) => [
      h("a", { href: `/knowledge/connectors/${encodeURIComponent(c.id)}` }, c.name), KIND_NAME[c.kind] || c.kind, status(c.status),
      c.health && c.health.last_checked_at ? [when(c.health.last_checked_at), c.health.last_error ? h("div", { class: "error" }, c.health.last_error) : null] : "not yet",
      c.last_sync && c.last_sync.status ? [status(c.last_sync.status), " ", when(c.last_sync.finished_at)] : "never",
      c.dataset && c.dataset.id ? h("a", { href: `/knowledge/datasets/${encodeURIComponent(c.dataset.id)}` }, c.dataset.name || "dataset") : "none yet"]),
    admin ? "No connectors yet. Add one below to bring data into this workspace." : "No connectors yet. An Admin of this workspace can add one."))];
  if (admin) parts.push(createSection(ctx));
  else if (!page.connectors.length) parts.push(helpSection());
  view.replaceChildren(...parts);
}

// Add a connector: pick the kind; AWS kinds show the role-grant step first.
function createSection({ navigate }) {
  const kindFields = h("div", { id: "kind-fields" });
  const grant = h("div", { id: "grant-step" });
  const name = h("input", { name: "name", required: true, autocomplete: "off", maxlength: "120" });
  const description = h("input", { name: "description", autocomplete: "off", maxlength: "2000" });
  let kind = "documents";
  const show = async (k) => {
    kind = k;
    kindFields.replaceChildren(...configFields(k));
    grant.replaceChildren();
    if (k === "s3" || k === "dynamodb") {
      try { grant.replaceChildren(await roleGrant(k)); } catch (err) { grant.replaceChildren(problemBox(err)); }
    }
  };
  const [kindField, about] = kindPicker(show);
  const el = form(async (data, out) => {
    const body = { name: String(data.get("name") || "").trim(), kind, config: configFrom(el, kind) };
    if (!body.name) throw new Error("Give the connector a name.");
    const d = String(data.get("description") || "").trim();
    if (d) body.description = d;
    const c = await gateway("/v1/connectors", { method: "POST", body });
    out.replaceChildren(h("p", { class: "ok" }, `${c.name} added.`));
    announce(`${c.name} added`);
    const to = `/knowledge/connectors/${encodeURIComponent(c.id)}`;
    if (navigate) navigate(to); else location.assign(to);
  }, kindField, about, grant, field("Name", name, "Shown in the catalog; the dataset is named after it."),
  field("Description (optional)", description), kindFields, h("button", { type: "submit", id: "create-connector" }, "Add connector"));
  show(kind);
  return section("Add a connector", el);
}

async function renderOne({ view, params, me, navigate }) {
  const id = encodeURIComponent(params.connector_id);
  let c = await gateway(`/v1/connectors/${id}`);
  const admin = isAdmin(me);
  const list = h("ul", { class: "steps", id: "sync-history", "aria-live": "polite" },
    h("li", { class: "empty-item" }, "No sync has run yet."));
  const more = h("div", { class: "pager" });
  const healthBox = h("div", { id: "health" });
  const drawHealth = () => healthBox.replaceChildren(h("dl", { class: "facts" },
    h("dt", {}, "Status"), h("dd", { id: "connector-status" }, status(c.status)),
    h("dt", {}, "Kind"), h("dd", {}, KIND_NAME[c.kind] || c.kind),
    h("dt", {}, "Last checked"), h("dd", {}, c.health && c.health.last_checked_at ? when(c.health.last_checked_at) : "not yet"),
    h("dt", {}, "Access"), h("dd", { id: "last-error" }, c.health && c.health.last_error ? "failing (below)" : "works"),
    h("dt", {}, "Description"), h("dd", {}, c.description || "none"),
    h("dt", {}, "Dataset"), h("dd", {}, c.dataset && c.dataset.id ? h("a", { href: `/knowledge/datasets/${encodeURIComponent(c.dataset.id)}` }, c.dataset.name) : "written by the first sync")),
  explain(c.health && c.health.last_error));
  drawHealth();
  const parts = [h("h1", {}, c.name), section("Health", healthBox,
    admin ? h("div", { class: "row-actions" },
      action("Check access", async (out) => {
        c = await gateway(`/v1/connectors/${id}/check`, { method: "POST" });
        drawHealth();
        out.replaceChildren(h("span", { class: c.health.last_error ? "error" : "ok", id: "check-result" }, c.health.last_error ? "Access failed: see the reason above." : "Access works."));
      }, { id: "check-access", class: "secondary" }),
      action(c.status === "PAUSED" ? "Resume" : "Pause", async () => {
        await gateway(`/v1/connectors/${id}`, { method: "PATCH", body: { paused: c.status !== "PAUSED" } });
        if (navigate) navigate(location.pathname); else location.reload();
      }, { id: "pause-toggle", class: "secondary" })) : null)];
  if (c.kind === "documents" && admin) {
    parts.push(section("Upload documents", dropZone(async () => c, { onIndexed: () => history(params.connector_id, list, more).catch(() => {}) })));
  }
  if (admin) {
    const mode = h("select", { name: "mode" }, h("option", { value: "INCREMENTAL" }, "Incremental (what changed)"), h("option", { value: "FULL_REFRESH" }, "Full refresh (everything again)"));
    parts.push(section("Sync", c.status === "PAUSED" ? h("p", { class: "note" }, "This connector is paused: resume it to sync.") : null, form(async (data, out) => {
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
  if (admin) parts.push(editSection(c, id, navigate), deleteSection(c, id, navigate));
  view.replaceChildren(...parts);
  try {
    await history(params.connector_id, list, more);
  } catch (err) {
    if (c.last_sync) { list.replaceChildren(syncLine({ mode: "", ...c.last_sync })); } // a deployment without the history call
    more.replaceChildren(problemBox(err));
  }
}

function editSection(c, id, navigate) {
  const name = h("input", { name: "name", value: c.name, maxlength: "120", autocomplete: "off" });
  const description = h("input", { name: "description", value: c.description || "", maxlength: "2000", autocomplete: "off" });
  const grant = h("div", {});
  if (c.kind === "s3" || c.kind === "dynamodb") roleGrant(c.kind).then((g) => grant.replaceChildren(h("details", {}, h("summary", {}, "How to grant the role"), g)), () => {});
  const el = form(async (data, out) => {
    const body = { name: String(data.get("name") || "").trim(), description: String(data.get("description") || "").trim() };
    const config = configFrom(el, c.kind);
    if (Object.keys(config).length) body.config = config;
    const saved = await gateway(`/v1/connectors/${id}`, { method: "PATCH", body });
    out.replaceChildren(h("p", { class: "ok", id: "edit-result" }, `Saved. ${saved.health && saved.health.last_error ? "The source check failed: see Health." : ""}`));
    if (navigate) navigate(location.pathname);
  }, field("Name", name), field("Description", description), grant, ...configFields(c.kind, c.config || {}, { editing: true }),
  h("button", { type: "submit", id: "save-connector" }, "Save changes"));
  return section("Edit", el);
}

function deleteSection(c, id, navigate) {
  const confirmBox = h("input", { type: "checkbox", id: "confirm-delete" });
  return section("Delete",
    h("p", {}, `Deleting ${c.name} also deletes its dataset "${c.dataset && c.dataset.name ? c.dataset.name : ""}"${c.kind === "documents" ? " and every uploaded file" : ""}. The sync history stays in the audit trail.`),
    field(`Yes, delete ${c.name} and its data`, confirmBox),
    action("Delete connector", async () => {
      if (!confirmBox.checked) throw new Error("Tick the box above to confirm.");
      await gateway(`/v1/connectors/${id}`, { method: "DELETE" });
      if (navigate) navigate("/knowledge/connectors"); else location.assign("/knowledge/connectors");
    }, { class: "danger", id: "delete-connector" }));
}
