// Overview: the current workspace and the signed-in account; without a workspace, the ways to get one.
import { platform } from "../api.js";
import { h, section, badge, when, problemBox, action } from "../dom.js";
import { drStatus } from "../replication.js";
import { switchWorkspace } from "../shell.js";

// How the session was signed in, in words (the token's amr values).
const AMR_WORDS = { pwd: "password", otp: "authenticator code", hwk: "security key", swk: "passkey", mfa: "two factors",
  email: "e-mailed code", mca: "several factors", fed: "single sign-on", sms: "text message", face: "face", fpt: "fingerprint", pin: "PIN" };
export const signInWords = (amr) => {
  const words = [...new Set((amr || []).filter((a) => a !== "user").map((a) => AMR_WORDS[a] || a))];
  return words.length ? words.join(", ") : "not reported";
};

export async function render({ view, me, workspaces = [], listed = null, reloadFrame, navigate }) {
  const parts = [h("h1", {}, "Overview")];
  if (!me.workspace_id && workspaces.length) {
    parts.push(section("Choose a workspace",
      h("p", {}, "You belong to these workspaces; open one to start."),
      h("ul", { class: "chat-list" }, workspaces.map((w) => h("li", {}, `${w.name} (${w.residency}) `,
        action(`Open ${w.name}`, async () => { await switchWorkspace(w.id); if (reloadFrame) await reloadFrame(); if (navigate) await navigate("/"); }, { class: "small" }))))));
  } else if (!me.workspace_id) {
    parts.push(section("You have no workspace yet",
      h("p", {}, "Create a workspace, or accept an invitation from the link in your e-mail."),
      h("a", { class: "button", href: "/workspaces/new" }, "Create a workspace")));
  } else {
    try {
      // at start the frame's list holds this workspace as GET /v1/workspaces/{id} answers it
      const known = listed ? (await listed).find((w) => w.id === me.workspace_id) : null;
      const ws = known || await platform(`/v1/workspaces/${encodeURIComponent(me.workspace_id)}`);
      parts.push(section("Workspace",
        h("dl", { class: "facts", id: "workspace-facts" },
          h("dt", {}, "Name"), h("dd", { id: "ws-name" }, ws.name),
          h("dt", {}, "Residency"), h("dd", { id: "ws-residency" }, ws.residency, " ", h("span", { class: "meta" }, `(${ws.region || ""})`)),
          h("dt", {}, "Replication"), h("dd", {}, ws.replication),
          h("dt", {}, "Disaster-recovery copy"), h("dd", {}, drStatus(ws)),
          h("dt", {}, "MFA required"), h("dd", {}, ws.enforce_mfa ? "yes" : "no"),
          h("dt", {}, "Members"), h("dd", {}, String(ws.member_count ?? "—")),
          h("dt", {}, "Created"), h("dd", {}, when(ws.created_at)))));
    } catch (err) {
      parts.push(problemBox(err));
    }
  }
  parts.push(section("Your account",
    h("dl", { class: "facts" },
      h("dt", {}, "E-mail"), h("dd", { id: "me-email" }, me.email || ""),
      h("dt", {}, "Roles"), h("dd", { id: "me-roles" }, (me.roles || []).map((r) => badge(r))),
      h("dt", {}, "Signed in with"), h("dd", { id: "me-amr" }, signInWords(me.amr)))));
  view.replaceChildren(...parts);
}
