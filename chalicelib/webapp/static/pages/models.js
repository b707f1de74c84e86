// Models (Admin): the workspace's model connections (add an OpenAI-compatible endpoint or a Bedrock
// model in the workspace's region, test it with the exact failure named, remove it; keys are sent once
// and never shown again; edit its name, URL, key or models) and which models each role may use (the
// per-role allow-list). A warning shows while make run admits model servers on this machine (LOCAL_ENDPOINTS=1).
import { platform } from "../api.js";
import { h, field, form, table, section, badge, action, problemBox, loading, empty } from "../dom.js";
import { isAdmin } from "../shell.js";

const RESIDENCY_NAMES = { "us-east-1": "us-east", "eu-central-1": "eu-central" };

function checksView(result) {
  return h("div", { class: result.ok ? "ok" : "problem", role: "status", "data-test-ok": String(result.ok) },
    h("p", {}, result.ok ? "The connection works." : "The connection failed."),
    h("ul", {}, (result.checks || []).map((c) => h("li", {}, badge(c.ok ? "ok" : (c.code || "failed"), c.ok ? "good" : "warn"), " ", c.message))));
}

/** The edit form of one connection: only the fields changed are sent; a blank key keeps the kept one. */
function editForm(c, done) {
  const name = h("input", { name: "name", value: c.name, required: true, pattern: "[a-z][a-z0-9-]{1,31}", autocomplete: "off" });
  const url = h("input", { type: "url", name: "base_url", value: c.base_url || "", disabled: c.kind === "bedrock" });
  const key = h("input", { type: "password", name: "api_key", autocomplete: "off", disabled: c.kind === "bedrock" });
  const dropKey = h("input", { type: "checkbox", name: "drop_key", disabled: !c.has_key });
  const ids = (c.models || []).map((m) => m.id).join(", ");
  const models = h("input", { name: "models", value: ids });
  return form(async (data, out) => {
    const body = {};
    const newName = String(data.get("name") || "").trim();
    if (newName !== c.name) body.name = newName;
    if (c.kind === "openai" && String(data.get("base_url") || "").trim() !== c.base_url) body.base_url = String(data.get("base_url")).trim();
    if (dropKey.checked) body.api_key = null;
    else if (String(data.get("api_key") || "")) body.api_key = String(data.get("api_key"));
    const listed = String(data.get("models") || "").split(",").map((s) => s.trim()).filter(Boolean);
    if (listed.join(", ") !== ids) body.models = listed.map((id) => (c.models || []).find((m) => m.id === id) || { id });
    if (!Object.keys(body).length) { out.replaceChildren(h("p", { class: "note" }, "Nothing changed.")); return; }
    const saved = await platform(`/v1/models/connections/${encodeURIComponent(c.name)}`, { method: "PATCH", body });
    key.value = "";
    await done(saved);
  }, field("Name", name, "Renaming changes the ids its models are offered as (name/model)."),
  field("Endpoint URL", url), field("New API key", key, "Leave empty to keep the kept key; it is never shown."),
  field("Remove the key", dropKey), field("Models", models, "Comma-separated model ids."),
  h("button", { type: "submit", class: "small" }, "Save changes"));
}

function connectionsBox(region, onChange) {
  const box = h("div", {}, loading());
  const warning = h("div", {});
  const draw = async () => {
    try {
      const { items, local_endpoints: local } = await platform("/v1/models/connections");
      warning.replaceChildren(local ? h("p", { class: "problem", id: "local-endpoints-on", role: "note" },
        "Model servers on this machine are admitted (make run with LOCAL_ENDPOINTS=1): any Admin may point a connection at a service on this computer. A deployment never allows this.") : "");
      box.replaceChildren(items.length ? table("Model connections", ["Name", "Endpoint", "Models", "Key", ""], items.map((c) => [
        h("strong", {}, c.name), c.kind === "bedrock" ? `Bedrock (${c.region})` : `${c.base_url} (${c.region})`,
        h("ul", { class: "plain" }, (c.model_ids || []).map((id) => h("li", {}, h("code", {}, id)))),
        c.has_key ? badge("kept encrypted") : badge("none"),
        h("span", {}, action("Test", async (out) => {
          out.replaceChildren(checksView(await platform(`/v1/models/connections/${encodeURIComponent(c.name)}/test`, { method: "POST" })));
        }, { class: "small", "aria-label": `Test ${c.name}` }), " ",
        action("Edit", async (out) => {
          out.replaceChildren(editForm(c, async () => { await draw(); onChange(); }));
        }, { class: "small secondary", "aria-label": `Edit ${c.name}` }), " ",
        action("Remove", async () => {
          if (!confirm(`Remove the connection ${c.name}? Chats and agents using its models will need another model.`)) return;
          await platform(`/v1/models/connections/${encodeURIComponent(c.name)}`, { method: "DELETE" });
          await draw();
          onChange();
        }, { class: "small secondary", "aria-label": `Remove ${c.name}` }))]))
        : empty("No model connections yet: add one below. Until a generative model is connected, chat answers quote your sources."));
    } catch (err) { box.replaceChildren(problemBox(err)); }
  };
  const kind = h("select", { name: "kind", id: "conn-kind" }, h("option", { value: "openai" }, "OpenAI-compatible endpoint (llama.cpp, Ollama, vLLM, LM Studio, a hosted provider)"),
    h("option", { value: "bedrock" }, "Amazon Bedrock model"));
  const name = h("input", { name: "name", id: "conn-name", required: true, pattern: "[a-z][a-z0-9-]{1,31}", placeholder: "team-llm", autocomplete: "off" });
  const url = h("input", { type: "url", name: "base_url", id: "conn-url", placeholder: "https://models.example.com/v1" });
  const key = h("input", { type: "password", name: "api_key", id: "conn-key", autocomplete: "off" });
  const models = h("input", { name: "models", id: "conn-models", placeholder: "Leave empty to list them from the endpoint" });
  const tools = h("input", { type: "checkbox", name: "tool_use", id: "conn-tools" });
  const add = form(async (data, out) => {
    const body = { name: String(data.get("name")).trim(), kind: kind.value, region: RESIDENCY_NAMES[region] || region };
    const ids = String(data.get("models") || "").split(",").map((s) => s.trim()).filter(Boolean);
    if (kind.value === "openai") {
      body.base_url = String(data.get("base_url")).trim();
      if (String(data.get("api_key") || "")) body.api_key = String(data.get("api_key"));
    }
    if (ids.length) body.models = ids.map((id) => ({ id, tool_use: tools.checked }));
    const made = await platform("/v1/models/connections", { method: "POST", body });
    key.value = "";
    out.replaceChildren(h("p", { class: "ok", id: "conn-added" }, `Added ${made.name}: ${(made.model_ids || []).join(", ")}. The key is kept encrypted and will not be shown again.`));
    await draw();
    onChange();
  }, h("p", { class: "note" }, `Connections serve this workspace's region (${region}) only${region === "eu-central-1" ? ": an EU workspace may use only connections in eu-central" : ""}. Private and loopback addresses are refused unless the deployment declares them (make run: LOCAL_ENDPOINTS=1 admits model servers on this machine).`),
  field("Kind", kind), field("Name", name, "Lower-case letters, digits and dashes; its models are offered as name/model."),
  field("Endpoint URL", url, "OpenAI-compatible base URL (…/v1). Not used for Bedrock."),
  field("API key", key, "Optional. Sent once, kept as KMS ciphertext in this region, never shown again."),
  field("Models", models, "Comma-separated model ids (Bedrock: single-region model ids)."),
  field("These models can choose tools (agents)", tools),
  h("button", { type: "submit", id: "conn-add" }, "Add connection"));
  kind.addEventListener("change", () => { url.disabled = key.disabled = kind.value === "bedrock"; });
  draw();
  return [warning, box, h("h3", {}, "Add a connection"), add];
}

/** The per-role model allow-list form (also on the settings page); ``draw`` reloads it. */
export function allowListBox() {
  const box = h("div", {}, loading());
  const draw = async () => {
    try {
      const [list, models] = await Promise.all([platform("/v1/models/allow-list"), platform("/v1/models")]);
      const roles = list.roles || {};
      const ids = (models.items || []).map((m) => m.id);
      const rows = ["admin", "member", "viewer"].map((role) => {
        const restricted = h("input", { type: "checkbox", name: `restrict-${role}`, checked: Array.isArray(roles[role]) });
        const boxes = ids.map((id) => h("input", { type: "checkbox", name: `allow-${role}`, value: id, checked: (roles[role] || []).includes(id) }));
        return h("fieldset", {}, h("legend", {}, role), field(`Restrict ${role}s to the models ticked below`, restricted), boxes.map((b) => field(b.value, b)));
      });
      box.replaceChildren(form(async (data, out) => {
        const body = { roles: {} };
        for (const role of ["admin", "member", "viewer"]) body.roles[role] = data.get(`restrict-${role}`) ? data.getAll(`allow-${role}`) : null;
        const saved = await platform("/v1/models/allow-list", { method: "PUT", body });
        out.replaceChildren(h("p", { class: "ok" }, `Saved: ${Object.keys(saved.roles || {}).join(", ") || "no role"} restricted.`));
      }, h("p", { class: "note" }, `Models serving this workspace's region (${models.region || ""}); a role without a list may use all of them.`), rows, h("button", { type: "submit" }, "Save allow-list")));
    } catch (err) { box.replaceChildren(problemBox(err)); }
  };
  draw();
  return { box, draw };
}

export async function render({ view, me }) {
  if (!isAdmin(me)) {
    view.replaceChildren(h("h1", {}, "Models"), h("p", { class: "note", id: "admins-only" }, "Admins only: ask an Admin of this workspace to connect or allow models."));
    return;
  }
  const models = await platform("/v1/models");
  const allow = allowListBox();
  view.replaceChildren(h("h1", {}, "Models"),
    models.generative_available ? null : h("p", { class: "note", id: "no-generative-model" }, models.notice || "No generative model is connected."),
    section("Model connections", ...connectionsBox(models.region, allow.draw)),
    section("Models allowed per role", allow.box));
}
