// Catalog search with filters; each result opens its dataset page.
import { gateway } from "../api.js";
import { h, field, form, table, section, badge, problemBox, loading } from "../dom.js";
import { isAdmin } from "../shell.js";
import { dropZone, uploadConnector } from "../uploads.js";

const CLASSES = ["", "PUBLIC", "INTERNAL", "CONFIDENTIAL", "PII"];

export async function render({ view, query, navigate, me }) {
  const f = { q: query.get("q") || "", classification: query.get("classification") || "", owner: query.get("owner") || "",
    fresher_than: query.get("fresher_than") || "", field_classification: query.get("field_classification") || "" };
  const results = h("div", {}, loading());
  const q = h("input", { type: "search", name: "q", value: f.q, placeholder: "orders, customers…" });
  const cls = h("select", { name: "classification" }, CLASSES.map((c) => h("option", { value: c, selected: c === f.classification }, c || "Any")));
  const fcls = h("select", { name: "field_classification" }, CLASSES.map((c) => h("option", { value: c, selected: c === f.field_classification }, c || "Any")));
  const owner = h("input", { name: "owner", value: f.owner });
  const fresh = h("input", { name: "fresher_than", value: f.fresher_than, placeholder: "PT1H" });
  const search = form(async (data) => {
    const params = new URLSearchParams([...data.entries()].filter(([, v]) => v));
    await navigate("/knowledge" + (params.toString() ? "?" + params : ""));
  }, h("div", { class: "row" }, field("Search", q), field("Classification", cls), field("Has fields classified", fcls),
    field("Owner", owner), field("Fresher than (ISO 8601 duration)", fresh)), h("button", { type: "submit" }, "Search"));

  const anyFilter = Object.values(f).some(Boolean);
  const rows = [];
  async function more(after) {
    try {
      const page = await gateway("/v1/catalog/datasets", { query: { ...f, limit: 25, after } });
      rows.push(...page.items);
      results.replaceChildren(page.total_count ? h("p", { class: "meta" }, `${page.total_count} dataset${page.total_count === 1 ? "" : "s"}`) : "",
        table("Datasets", ["Name", "Source", "Owner", "Classification", "Freshness", "Rows"], rows.map((d) => [
          h("a", { href: `/knowledge/datasets/${encodeURIComponent(d.id)}` }, d.name), d.source ? `${d.source.name} (${d.source.kind})` : "",
          d.owner, badge(d.classification, d.classification === "PII" ? "warn" : ""), d.freshness || "—", String(d.row_count ?? "—")]),
        anyFilter ? "No dataset matches these filters." : "No datasets yet: add a connector or upload documents above."),
        page.has_more ? h("button", { type: "button", class: "secondary", onclick: () => more(page.next_cursor) }, "More results") : "");
    } catch (err) { results.replaceChildren(problemBox(err)); }
  }
  view.replaceChildren(h("h1", {}, "Knowledge and data"),
    h("p", {}, h("a", { href: "/knowledge/query" }, "Query editor"), " · ", h("a", { href: "/knowledge/connectors" }, "Connectors and uploads")),
    isAdmin(me) ? section("Add documents", h("p", { class: "note" }, "Files go to the workspace's \"Uploaded documents\" connector and are indexed for chat and search."),
      dropZone(uploadConnector, { onIndexed: (n) => { if (n) { rows.length = 0; more(""); } } })) : "",
    section("Search the catalog", search), section("Results", results));
  await more("");
}
