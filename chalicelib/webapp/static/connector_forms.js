// What each connector kind asks for, in words: the fields of its config (GET/POST /v1/connectors), the
// role-grant step of the kinds read through a role the workspace grants (s3, dynamodb: the trust policy
// and ExternalId from GET /v1/connector-access), and health errors explained with what to do.
import { gateway } from "./api.js";
import { h, field, section } from "./dom.js";

export const KINDS = [
  ["documents", "Documents", "Upload PDF, Word, Markdown, HTML or text files; they are split into passages for chat and search."],
  ["s3", "Amazon S3 bucket", "CSV, JSON Lines or Parquet files in a bucket of your AWS account, read through a role you grant."],
  ["dynamodb", "Amazon DynamoDB table", "A table of your AWS account, read through a role you grant."],
  ["http", "HTTP API", "A JSON API that pages through a list of records (optional API key)."],
];
export const KIND_NAME = Object.fromEntries(KINDS.map(([k, n]) => [k, n]));

// [config key, label, hint, type] per kind; type: text | number | list | secret.
const FIELDS = {
  documents: [
    ["max_passage_chars", "Passage length (characters)", "200 to 8000; default 1000.", "number"],
    ["overlap_chars", "Overlap between passages (characters)", "0 to 1000; default 100.", "number"],
  ],
  s3: [
    ["role_arn", "Role ARN", "The role you created in the step above, e.g. arn:aws:iam::123456789012:role/aiplat-reader.", "text", true],
    ["bucket", "Bucket", "The bucket name, e.g. acme-exports.", "text", true],
    ["prefix", "Prefix", "Only keys under this prefix, e.g. crm/customers/ (optional).", "text"],
    ["format", "File format", "auto, csv, jsonl or parquet (auto reads the extension).", "text"],
    ["primary_key", "Primary key columns", "Comma-separated, e.g. customer_id (optional: rows are keyed by file and line otherwise).", "list"],
  ],
  dynamodb: [
    ["role_arn", "Role ARN", "The role you created in the step above.", "text", true],
    ["table", "Table", "The table name (or ARN) in this workspace's region.", "text", true],
    ["updated_at_attribute", "Updated-at attribute", "An attribute holding the item's last change, for incremental syncs (optional).", "text"],
  ],
  http: [
    ["url", "URL", "https address of the list, e.g. https://api.example.com/v1/customers.", "text", true],
    ["items_field", "Items field", "The field of each answer holding the records (default: items).", "text"],
    ["next_field", "Next-page field", "The field holding the next page's cursor (optional).", "text"],
    ["id_field", "Id field", "The field identifying a record (optional).", "text"],
    ["page_size", "Page size", "1 to 1000 (optional).", "number"],
    ["api_key", "API key", "Stored encrypted and never shown again; leave empty to keep the current one.", "secret"],
    ["api_key_header", "API key header", "Default: Authorization (sent as Bearer).", "text"],
  ],
};

// The kind's config fields as labelled inputs, filled from ``config`` when editing.
export function configFields(kind, config = {}, { editing = false } = {}) {
  return (FIELDS[kind] || []).map(([key, label, hint, type, required]) => {
    const value = config[key];
    const input = h("input", { name: `config.${key}`, type: type === "number" ? "number" : type === "secret" ? "password" : "text",
      autocomplete: "off", value: value === undefined || value === null ? "" : Array.isArray(value) ? value.join(", ") : String(value),
      "data-type": type, required: required && !editing ? true : null });
    const set = type === "secret" && (config.secrets_set || []).includes(key) ? " (one is set)" : "";
    return field(`${label}${required ? "" : " (optional)"}${set}`, input, hint);
  });
}

// The config object from a form's FormData: empty fields left out, numbers and lists typed.
export function configFrom(form, kind) {
  const out = {};
  for (const [key, , , type] of FIELDS[kind] || []) {
    const el = form.querySelector(`[name="config.${key}"]`);
    const v = el ? el.value.trim() : "";
    if (!v) continue;
    out[key] = type === "number" ? Number(v) : type === "list" ? v.split(",").map((x) => x.trim()).filter(Boolean) : v;
  }
  return out;
}

function copyButton(text, label) {
  const btn = h("button", { type: "button", class: "small secondary" }, label);
  btn.addEventListener("click", async () => {
    try { await navigator.clipboard.writeText(text); btn.textContent = "Copied"; } catch { btn.textContent = "Select and copy the text"; }
    setTimeout(() => { btn.textContent = label; }, 1500);
  });
  return btn;
}

// The role-grant step: what to create in the workspace's AWS account before the connector can read.
export async function roleGrant(kind) {
  const access = await gateway("/v1/connector-access");
  const policy = JSON.stringify(access.trust_policy, null, 2);
  const perms = (access.permissions && access.permissions[kind]) || [];
  return h("div", { class: "role-grant", id: "role-grant" },
    h("h3", {}, "Step 1: grant the platform a role in your AWS account"),
    h("ol", {},
      h("li", {}, "In the IAM console of the account that holds the data, create a role for \"Another AWS account\"."),
      h("li", {}, "Replace its trust policy with this one (it lets only this platform assume the role, and only for this workspace):",
        h("pre", { class: "code", id: "trust-policy", tabindex: "0" }, policy), copyButton(policy, "Copy trust policy")),
      h("li", {}, "The ExternalId of this workspace (already in the policy): ", h("code", { id: "external-id" }, access.external_id), " ",
        copyButton(access.external_id, "Copy ExternalId")),
      h("li", {}, "Give the role read access, no more:", h("ul", {}, perms.map((p) => h("li", {}, h("code", {}, p))))),
      h("li", {}, "Paste the role's ARN below. After saving, \"Check access\" tries the role at once.")));
}

// A health error in words a person can act on, with the raw reason kept.
export function explain(error) {
  if (!error) return "";
  const e = String(error);
  let advice = null;
  if (/cannot assume role/i.test(e)) advice = "The platform could not assume the role: check that its trust policy is the one shown on this page (principal and ExternalId), and that the ARN is spelled right.";
  else if (/no role_arn/i.test(e)) advice = "Add the ARN of the role you granted (Edit below).";
  else if (/NoSuchBucket|ResourceNotFound|not found|404/i.test(e)) advice = "The bucket or table does not exist in this workspace's region: check its name and region.";
  else if (/AccessDenied|403|not authorized/i.test(e)) advice = "The role may not read this source: add the read permissions listed on this page to its policy.";
  else if (/401|unauthori[sz]ed/i.test(e)) advice = "The API refused the key: paste a valid API key (Edit below).";
  else if (/timed out|timeout|connection|refused/i.test(e)) advice = "The source did not answer: check the address and that it is reachable from the internet.";
  return h("div", { class: "problem", role: "alert" }, h("p", { class: "error" }, advice || "The last check failed."), h("p", { class: "meta" }, "Reason: ", e));
}

export const kindPicker = (onChange) => {
  const select = h("select", { name: "kind", id: "connector-kind" }, KINDS.map(([k, n]) => h("option", { value: k }, n)));
  const about = h("p", { class: "hint", id: "kind-about" }, KINDS[0][2]);
  select.addEventListener("change", () => { about.textContent = KINDS.find(([k]) => k === select.value)[2]; onChange(select.value); });
  return [field("Kind of source", select), about, select];
};

export const helpSection = () => section("What a connector does",
  h("p", {}, "A connector brings one source into the workspace as a dataset: documents you upload, a bucket or table of your AWS account, or an HTTP API. Chat answers cite it, the query page reads it, and field policies protect its sensitive columns."));
