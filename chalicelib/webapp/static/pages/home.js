// Overview: the current workspace and the signed-in account; without a workspace, the ways to get one.
import { platform } from "../api.js";
import { h, section, badge, when, problemBox } from "../dom.js";
import { drStatus } from "../replication.js";

export async function render({ view, me }) {
  const parts = [h("h1", {}, "Overview")];
  if (!me.workspace_id) {
    parts.push(section("You have no workspace yet",
      h("p", {}, "Create a workspace, or accept an invitation from the link in your e-mail."),
      h("a", { class: "button", href: "/workspaces/new" }, "Create a workspace")));
  } else {
    try {
      const ws = await platform(`/v1/workspaces/${encodeURIComponent(me.workspace_id)}`);
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
      h("dt", {}, "Signed in with"), h("dd", { id: "me-amr" }, (me.amr || []).join(", ")))));
  view.replaceChildren(...parts);
}
