// Query editor: one SELECT under the caller's ACL and field policies. Columns under a policy are
// marked, and their cells are shown as masked (the values arrive masked from the gateway).
import { gateway } from "../api.js";
import { h, field, form, section, badge, problemBox, when } from "../dom.js";

const MASKING = { MASK: "masked", HASH: "hashed", REDACT: "redacted" };

async function policiesOf(datasets) {
  const out = new Map();
  await Promise.all((datasets || []).map(async (d) => {
    try {
      const schema = await gateway(`/v1/catalog/datasets/${encodeURIComponent(d.id)}/schema`);
      for (const f of schema.fields) if (MASKING[f.policy]) out.set(f.name, f.policy);
    } catch { /* the result still shows; only the marking is missing */ }
  }));
  return out;
}

export async function render({ view, query }) {
  const start = query.get("dataset") ? `SELECT * FROM ${query.get("dataset").replace(/[^\w]/g, "")} LIMIT 20` : "SELECT * FROM customers LIMIT 20";
  const sql = h("textarea", { name: "sql", id: "sql", spellcheck: "false", rows: "6" }, start);
  const limit = h("input", { type: "number", name: "limit", min: "1", max: "10000", value: "1000" });
  const results = h("div", { id: "results" }, h("p", { class: "empty" }, "Run a query to see results."));
  const editor = form(async (data, status) => {
    results.replaceChildren(h("p", { class: "loading", role: "status" }, "Running…"));
    try {
      const res = await gateway("/v1/query", { method: "POST", body: { sql: String(data.get("sql")), limit: Number(data.get("limit") || 1000) } });
      const masked = await policiesOf(res.datasets);
      const head = res.columns.map((c) => h("th", { scope: "col" }, c.name, " ", h("span", { class: "meta" }, c.type),
        masked.has(c.name) ? [" ", badge(MASKING[masked.get(c.name)], "warn")] : null));
      const body = res.rows.map((row) => h("tr", {}, row.map((v, i) => {
        const policy = masked.get(res.columns[i].name);
        if (policy) return h("td", { class: "masked", "data-policy": policy }, v === null ? h("span", { class: "meta" }, "redacted") : String(v),
          h("span", { class: "sr-only" }, ` (${MASKING[policy]})`));
        return h("td", {}, v === null ? h("span", { class: "meta" }, "null") : typeof v === "object" ? JSON.stringify(v) : String(v));
      })));
      results.replaceChildren(
        h("p", { class: "meta" }, `${res.row_count} rows${res.truncated ? " (truncated)" : ""} · query `, h("code", {}, res.query_id || "")),
        masked.size ? h("p", { class: "note", id: "masked-note" }, `Columns under a field policy: ${[...masked.keys()].join(", ")}. Their clear values never leave the gateway.`) : "",
        h("div", { class: "table-wrap", role: "region", "aria-label": "Query results", tabindex: "0" },
          h("table", { id: "result-table" }, h("caption", {}, "Results"), h("thead", {}, h("tr", {}, head)), h("tbody", {}, body))),
        h("p", { class: "meta" }, "Datasets read: ", (res.datasets || []).map((d, i) => [i ? ", " : "",
          h("a", { href: `/knowledge/datasets/${encodeURIComponent(d.id)}` }, d.name), ` (fresh ${d.freshness || "—"}, synced ${when(d.last_synced_at)})`])));
    } catch (err) {
      results.replaceChildren(problemBox(err));
    }
    status.replaceChildren();
  }, field("SQL (one SELECT)", sql, "Datasets are tables by name. Runs under your access rights; masked fields stay masked."),
  field("Row limit", limit), h("button", { type: "submit", id: "run-query" }, "Run"));
  view.replaceChildren(h("h1", {}, "Query"), section("Editor", editor), section("Results", results));
}
