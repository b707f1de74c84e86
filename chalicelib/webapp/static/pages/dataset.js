// A dataset: facts and freshness, schema with field policies (Admins edit them), lineage as a graph.
import { gateway } from "../api.js";
import { h, table, section, badge, when, action, problemBox } from "../dom.js";
import { drawLineage } from "../lineage.js";
import { isAdmin } from "../shell.js";

const POLICIES = ["ALLOW", "MASK", "HASH", "REDACT", "DENY"];

export async function render({ view, params, me }) {
  const id = encodeURIComponent(params.dataset_id);
  const [ds, schema, lineage] = await Promise.all([
    gateway(`/v1/catalog/datasets/${id}`), gateway(`/v1/catalog/datasets/${id}/schema`),
    gateway(`/v1/lineage/${id}`, { query: { depth: 3 } }).catch((err) => ({ error: err }))]);
  const admin = isAdmin(me);
  const rows = schema.fields.map((f) => {
    let policy = badge(f.policy, f.policy === "ALLOW" ? "" : "warn");
    if (admin) {
      const select = h("select", { "aria-label": `Policy of ${f.name}` }, POLICIES.map((p) => h("option", { value: p, selected: p === f.policy }, p)));
      policy = h("span", {}, select, action("Save", async (out) => {
        const saved = await gateway(`/v1/catalog/datasets/${id}/fields/${encodeURIComponent(f.name)}/policy`, { method: "PUT", body: { policy: select.value } });
        out.textContent = `Now ${saved.policy}.`;
      }, { class: "small secondary" }));
    }
    return [h("code", {}, f.name), f.type, f.nullable ? "yes" : "no", badge(f.classification, f.classification === "PII" ? "warn" : ""), policy, f.description || ""];
  });
  view.replaceChildren(
    h("h1", {}, ds.name),
    section("About",
      h("dl", { class: "facts" },
        h("dt", {}, "Source"), h("dd", {}, ds.source ? `${ds.source.name} (${ds.source.kind}, ${ds.source.status})` : "—"),
        h("dt", {}, "Owner"), h("dd", {}, ds.owner),
        h("dt", {}, "Classification"), h("dd", {}, ds.classification),
        h("dt", {}, "Freshness"), h("dd", { id: "freshness" }, `${ds.freshness || "—"} (last synced ${when(ds.last_synced_at)})`),
        h("dt", {}, "Rows"), h("dd", {}, String(ds.row_count ?? "—")),
        h("dt", {}, "Access"), h("dd", {}, (ds.acl || []).map((p) => `${p.type}:${p.id}`).join(", ") || "—")),
      h("p", {}, h("a", { href: `/knowledge/query?dataset=${encodeURIComponent(ds.name)}` }, "Query this dataset"))),
    section(`Schema (version ${schema.schema_version ?? "?"})`,
      table("Fields and their policies", ["Field", "Type", "Nullable", "Classification", "Policy", "Description"], rows, "No fields yet."),
      admin ? h("p", { class: "note" }, "Policy changes are audited and apply to every query, answer and export.") : null),
    section("Lineage", lineage.error ? problemBox(lineage.error)
      : lineage.nodes.length ? [drawLineage(lineage, lineage.root || params.dataset_id),
        lineage.truncated ? h("p", { class: "note" }, "The graph is truncated at depth 3.") : null]
        : h("p", { class: "empty" }, "No lineage recorded yet.")));
}
