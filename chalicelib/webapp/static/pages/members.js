// Members and invitations (Admin): roles, removal, unlock, MFA reset; invite, revoke, pending list.
import { platform, idempotencyKey } from "../api.js";
import { h, field, form, table, section, badge, when, action, problemBox, loading } from "../dom.js";

const ROLES = ["admin", "member", "viewer"];

async function all(path, key) {
  const out = [];
  let after = "";
  do {
    const page = await platform(path, { query: { limit: 200, after } });
    out.push(...page[key]);
    after = page.has_more ? page.next_cursor : "";
  } while (after);
  return out;
}

export async function render({ view, me }) {
  const ws = encodeURIComponent(me.workspace_id);
  const membersBox = h("div", {}, loading());
  const invitesBox = h("div", {}, loading());

  async function drawMembers() {
    try {
      const members = await all(`/v1/workspaces/${ws}/members`, "members");
      membersBox.replaceChildren(table("Members", ["E-mail", "Role", "Joined", "Actions"], members.map((m) => {
        const select = h("select", { "aria-label": `Role of ${m.email}` }, ROLES.map((r) => h("option", { value: r, selected: r === m.role }, r)));
        const base = `/v1/workspaces/${ws}/members/${encodeURIComponent(m.user_id)}`;
        return [m.email, h("span", {}, select, action("Save role", async (out) => {
          await platform(base, { method: "PATCH", body: { role: select.value } });
          out.textContent = "Saved.";
        }, { class: "small secondary" })), `${when(m.joined_at)} (${m.joined_via})`,
        h("span", {},
          action("Unlock", async (out) => { const r = await platform(base + "/unlock", { method: "POST" }); out.textContent = r.was_locked ? "Unlocked." : "Was not locked."; }, { class: "small secondary" }),
          action("Reset MFA", async (out) => {
            if (!confirm(`Remove every second factor of ${m.email}? This is audited.`)) return;
            const r = await platform(base + "/mfa/reset", { method: "POST" });
            out.textContent = `Removed: ${(r.removed_methods || []).join(", ") || "nothing"}.`;
          }, { class: "small secondary" }),
          m.user_id === me.user_id ? null : action("Remove", async () => {
            if (!confirm(`Remove ${m.email} from the workspace?`)) return;
            await platform(base, { method: "DELETE" });
            await drawMembers();
          }, { class: "small danger" }))];
      })));
    } catch (err) { membersBox.replaceChildren(problemBox(err)); }
  }

  async function drawInvites() {
    try {
      const invitations = await all(`/v1/workspaces/${ws}/invitations`, "invitations");
      const pending = invitations.filter((i) => i.status === "pending");
      const past = invitations.filter((i) => i.status !== "pending");
      invitesBox.replaceChildren(
        table("Pending invitations", ["E-mail", "Role", "Expires", "Invited by", ""], pending.map((i) => [
          h("span", { class: "invite-email" }, i.email), i.role, when(i.expires_at), i.invited_by ? i.invited_by.email : "",
          action("Revoke", async () => { await platform(`/v1/workspaces/${ws}/invitations/${i.id}`, { method: "DELETE" }); await drawInvites(); }, { class: "small danger" })]),
        "No pending invitations."),
        past.length ? h("details", {}, h("summary", {}, `Earlier invitations (${past.length})`),
          table("Earlier invitations", ["E-mail", "Role", "Status", "Created"], past.map((i) => [i.email, i.role, badge(i.status), when(i.created_at)]))) :"");
    } catch (err) { invitesBox.replaceChildren(problemBox(err)); }
  }

  const email = h("input", { type: "email", name: "email", required: true, autocomplete: "off" });
  const role = h("select", { name: "role" }, ROLES.map((r) => h("option", { value: r, selected: r === "member" }, r)));
  const invite = form(async (data, status) => {
    const inv = await platform(`/v1/workspaces/${ws}/invitations`, { method: "POST", headers: { "Idempotency-Key": idempotencyKey() },
      body: { email: String(data.get("email")).trim(), role: data.get("role") } });
    status.replaceChildren(h("p", { class: "ok", id: "invite-sent" }, `Invitation e-mailed to ${inv.email} (${inv.role}).`));
    email.value = "";
    await drawInvites();
  }, h("div", { class: "row" }, field("E-mail address", email), field("Role", role)), h("button", { type: "submit" }, "Invite"));

  view.replaceChildren(h("h1", {}, "Members and invitations"),
    section("Invite a teammate", invite), section("Invitations", invitesBox), section("Members", membersBox));
  await Promise.all([drawMembers(), drawInvites()]);
}
