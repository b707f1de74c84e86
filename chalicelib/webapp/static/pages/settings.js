// Workspace settings (Admin): name, MFA, domain-join, replication (with the EU acknowledgement and
// the DR lag: `replication_lag_seconds`, `last_replicated_at`), chat/run auto-expiry, the hosts answers may link
// to (`answer_link_hosts`), whether chats may allow general answers (`answer_mode`), model allow-list per role, SSO
// connections, support access grants and usage. Parts whose API is not on this deployment yet say so.
import { platform, missing } from "../api.js";
import { h, field, form, table, section, badge, when, action, problemBox, loading } from "../dom.js";
import { drStatus } from "../replication.js";
import { allowListBox } from "./models.js";

const pendingApi = (what) => h("p", { class: "pending-api" }, `${what} is not available on this deployment yet.`);

export async function render({ view, me, reloadFrame }) {
  const wsId = encodeURIComponent(me.workspace_id);
  const ws = await platform(`/v1/workspaces/${wsId}`);
  const s = ws.settings || {};
  const name = h("input", { name: "name", value: ws.name, maxlength: "100" });
  const mfa = h("input", { type: "checkbox", name: "enforce_mfa", checked: ws.enforce_mfa });
  const dj = (s.domain_join || {});
  const djOn = h("input", { type: "checkbox", name: "domain_join", checked: !!dj.enabled });
  const djDomain = h("input", { name: "domain", value: dj.domain || me.email.split("@")[1] || "" });
  const expiry = h("input", { name: "chat_auto_expiry", value: s.chat_auto_expiry || "", placeholder: "P30D (empty: never)" });
  const linkHosts = h("input", { name: "answer_link_hosts", value: (s.answer_link_hosts || []).join(", "),
    placeholder: "docs.example.com, *.intranet.example.com" });
  const answerMode = h("input", { type: "checkbox", name: "answer_mode", checked: s.answer_mode === "knowledge_first" });
  const general = form(async (data, out) => {
    const body = { name: String(data.get("name")).trim(), enforce_mfa: mfa.checked,
      domain_join: djOn.checked ? { enabled: true, domain: String(data.get("domain")).trim() } : { enabled: false },
      chat_auto_expiry: String(data.get("chat_auto_expiry")).trim() || null,
      answer_link_hosts: String(data.get("answer_link_hosts")).split(/[\s,]+/).filter(Boolean),
      answer_mode: answerMode.checked ? "knowledge_first" : "knowledge_only" };
    await platform(`/v1/workspaces/${wsId}`, { method: "PATCH", body });
    out.replaceChildren(h("p", { class: "ok" }, "Saved."));
    await reloadFrame();
  }, field("Name", name), field("Require multi-factor authentication for every member", mfa),
  field("Let people with a verified address at this domain join as Members", djOn), field("Domain", djDomain, "Must be the domain of your own verified e-mail."),
  field("Chat and agent run auto-expiry (ISO 8601 duration)", expiry),
  field("Hosts answers may link to", linkHosts, "Links to other hosts lose their address unless a cited source holds it; images are kept only from this platform."),
  field("Chats may allow general answers", answerMode, "When the sources do not answer, a chat that allows it answers from the model's general knowledge, labelled as not from your sources."),
  h("button", { type: "submit" }, "Save"));

  view.replaceChildren(h("h1", {}, "Settings"),
    section("General", h("p", { class: "meta" }, `Residency ${ws.residency} (${ws.region || ""}) — fixed at creation; moving regions is a supervised migration.`), general),
    section("Replication", replication(ws, wsId)),
    section("Models allowed per role", allowListBox().box),
    section("Single sign-on", ssoBox(wsId)),
    section("Support access", supportBox(wsId)),
    section("Usage", usageBox()));
}

function replication(ws, wsId) {
  const select = h("select", { name: "replication" }, ["none", "in-region-multi-az", "cross-region-dr"].map((v) => h("option", { value: v, selected: v === ws.replication }, v)));
  const ack = h("input", { type: "checkbox", id: "ack-leaves", name: "ack" });
  const dialog = h("dialog", { id: "eu-ack", "aria-labelledby": "eu-ack-title" },
    h("h2", { id: "eu-ack-title" }, "Data will leave eu-central-1"),
    h("p", {}, "Cross-region disaster recovery copies this EU workspace's content, encrypted, to a secondary region. Your acknowledgement is written to the audit trail with your identity."),
    field("I acknowledge that data leaves the region", ack),
    h("button", { type: "button", id: "ack-confirm" }, "Enable replication"), h("button", { type: "button", class: "secondary", id: "ack-cancel" }, "Cancel"));
  const out = h("div", { role: "status" });
  const save = async (acknowledge) => {
    const body = { replication: select.value };
    if (acknowledge) body.acknowledge_data_leaves_region = true;
    try {
      const next = await platform(`/v1/workspaces/${wsId}`, { method: "PATCH", body });
      out.replaceChildren(h("p", { class: "ok", id: "replication-saved" }, `Replication is now ${next.replication}.`));
      const shown = dialog.parentNode && dialog.parentNode.querySelector("#dr-lag");
      if (shown) shown.replaceWith(drStatus(next));
    } catch (err) { out.replaceChildren(problemBox(err)); }
  };
  dialog.querySelector("#ack-cancel").addEventListener("click", () => dialog.close());
  dialog.querySelector("#ack-confirm").addEventListener("click", async () => { if (!ack.checked) { ack.focus(); return; } dialog.close(); await save(true); });
  const button = h("button", { type: "button" }, "Save replication");
  button.addEventListener("click", () => {
    if (select.value === "cross-region-dr" && ws.residency === "eu-central" && ws.replication !== "cross-region-dr") dialog.showModal();
    else save(false);
  });
  return [field("Policy", select, "none: in-region backups only · in-region-multi-az: synchronous replicas, RPO ≈ 0, RTO < 15 min · cross-region-dr: encrypted async copy to a secondary region, RPO 15 min."),
    button, h("p", {}, "Disaster-recovery copy: ", drStatus(ws)), out, dialog];
}


// SSO: create a connection (kind preset, domain, issuer, client), then prove the domain: each
// connection shows its verification status and what to publish (well-known file or DNS TXT record).
function verificationOf(c) {
  if (c.verified) return badge(`verified ${when(c.verified_at)}`, "good");
  const v = c.verification || {};
  return h("div", { class: "sso-verify" }, badge("not verified", "warn"),
    h("p", { class: "meta" }, "Sign-in is routed to this provider only once the domain is verified. Publish either:"),
    h("ul", {}, h("li", {}, "the file ", h("code", {}, v.url || "—"), " containing ", h("code", {}, v.content || "—")),
      v.dns_txt_record ? h("li", {}, "or the DNS TXT record ", h("code", {}, v.dns_txt_record.name), " = ", h("code", {}, v.dns_txt_record.value)) : null));
}

function ssoBox(wsId) {
  const box = h("div", {}, loading());
  const kind = h("select", { name: "kind", id: "sso-kind" });
  const issuer = h("input", { type: "url", name: "issuer", id: "sso-issuer", required: true, placeholder: "https://login.example.com" });
  const domain = h("input", { name: "domain", id: "sso-email-domain", placeholder: "example.com" });
  const secret = h("input", { type: "password", name: "client_secret", id: "sso-client-secret", autocomplete: "off", required: true });
  const base = `/v1/workspaces/${wsId}/sso/connections`;
  const draw = async () => {
    try {
      const { connections } = await platform(base);
      box.replaceChildren(table("SSO connections", ["Domain", "Provider", "Verification", ""], connections.map((c) => [
        h("span", { class: "sso-domain" }, c.domain), `${c.display_name || c.kind} (${c.issuer})`,
        h("div", { "data-verified": String(!!c.verified) }, verificationOf(c)),
        h("span", {}, c.verified ? null : action("Check now", async (out) => {
          await platform(`${base}/${encodeURIComponent(c.domain)}/verify`, { method: "POST" });
          out.textContent = "Verified.";
          await draw();
        }, { class: "small secondary" }),
        action("Remove", async () => {
          if (!confirm(`Remove the SSO connection of ${c.domain}?`)) return;
          await platform(`${base}/${encodeURIComponent(c.domain)}`, { method: "DELETE" });
          await draw();
        }, { class: "small danger" }))]),
      "No SSO connection yet."));
    } catch (err) { box.replaceChildren(problemBox(err)); }
  };
  platform("/v1/sso/presets").then(({ presets }) => {
    kind.replaceChildren(...presets.map((p) => h("option", { value: p.kind, "data-example": p.example_issuer || "" }, p.label)));
    const hint = () => { const o = kind.selectedOptions[0]; issuer.placeholder = (o && o.dataset.example) || ""; domain.disabled = kind.value === "code_hosting"; };
    kind.addEventListener("change", hint);
    hint();
  }, () => kind.replaceChildren(h("option", { value: "open_source_identity_server" }, "Open-source identity server")));
  const create = form(async (data, out) => {
    const body = { kind: data.get("kind"), issuer: String(data.get("issuer")).trim(), client_id: String(data.get("client_id")).trim(),
      client_secret: String(data.get("client_secret")) };
    if (kind.value !== "code_hosting") body.domain = String(data.get("domain") || "").trim().toLowerCase();
    const name = String(data.get("display_name") || "").trim();
    if (name) body.display_name = name;
    const made = await platform(base, { method: "POST", body });
    secret.value = "";
    await draw();
    out.replaceChildren(h("p", { class: "ok", id: "sso-created" }, `Connection for ${made.domain} created; verify the domain below.`));
  }, h("div", { class: "row" }, field("Provider kind", kind), field("E-mail domain", domain), field("Display name", h("input", { name: "display_name", maxlength: "80" }))),
  h("div", { class: "row" }, field("Issuer URL", issuer), field("Client ID", h("input", { name: "client_id", id: "sso-client-id", required: true, autocomplete: "off" })),
    field("Client secret", secret, "Stored encrypted; never shown again.")),
  h("button", { type: "submit", id: "sso-create" }, "Create SSO connection"));
  draw();
  return [create, box];
}

function supportBox(wsId) {
  const box = h("div", {}, loading());
  const draw = async () => {
    try {
      const { grants } = await platform(`/v1/workspaces/${wsId}/support-grants`);
      box.replaceChildren(table("Support access grants", ["Support person", "Reason", "Expires", "Status", ""], grants.map((g) => [
        g.support_email, g.reason, when(g.expires_at), badge(g.status, g.status === "active" ? "warn" : ""),
        g.status === "active" ? action("Revoke", async () => { await platform(`/v1/workspaces/${wsId}/support-grants/${g.id}`, { method: "DELETE" }); await draw(); }, { class: "small danger" }) : ""]),
      "No support access granted."));
    } catch (err) { box.replaceChildren(problemBox(err)); }
  };
  const grant = form(async (data, out) => {
    await platform(`/v1/workspaces/${wsId}/support-grants`, { method: "POST", body: { support_email: String(data.get("support_email")).trim(), duration: data.get("duration"), reason: String(data.get("reason")).trim() } });
    out.replaceChildren(h("p", { class: "ok" }, "Granted; every use is audited."));
    await draw();
  }, h("div", { class: "row" }, field("Support person's e-mail", h("input", { type: "email", name: "support_email" })),
    field("For", h("select", { name: "duration" }, [["PT1H", "1 hour"], ["PT8H", "8 hours"], ["PT24H", "24 hours"], ["PT72H", "72 hours"]].map(([v, l]) => h("option", { value: v }, l)))),
    field("Reason", h("input", { name: "reason", minlength: "3" }))), h("button", { type: "submit" }, "Grant access"));
  draw();
  return [grant, box];
}

function usageBox() {
  const box = h("div", {}, loading());
  platform("/v1/usage").then((u) => {
    const rows = (u.items || []).map((r) => [r.day, r.model, String(r.requests ?? ""), String(r.input_tokens ?? ""), String(r.output_tokens ?? "")]);
    box.replaceChildren(h("p", { class: "meta" }, `${u.from} to ${u.to}`),
      table("Model usage per day", ["Day", "Model", "Requests", "Input tokens", "Output tokens"], rows, "No usage recorded in this period."));
  }, (err) => box.replaceChildren(missing(err) ? pendingApi("Usage reporting") : problemBox(err)));
  return box;
}
