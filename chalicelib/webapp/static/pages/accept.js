// The invitation e-mail's link: /invitations/accept?workspace_id=...&invitation_id=...
// A new user arrives here after signing up at the identity service (the deep link survives sign-in);
// an existing user after signing in. Accepting needs the invited, verified address.
import { platform, sessionCall } from "../api.js";
import { h, problemBox, when } from "../dom.js";
import { switchWorkspace } from "../shell.js";

export async function render({ view, query, me, reloadFrame, navigate }) {
  const workspaceId = query.get("workspace_id") || "";
  const invitationId = query.get("invitation_id") || "";
  const parts = [h("h1", {}, "Accept invitation")];
  if (!/^ws_\w+$/.test(workspaceId) || !/^inv_\w+$/.test(invitationId)) {
    parts.push(h("p", { class: "error", role: "alert" }, "This invitation link is incomplete. Open the link from the e-mail again."));
    view.replaceChildren(...parts);
    return;
  }
  const result = h("div", { role: "status" });
  const accept = h("button", { type: "button", id: "accept" }, "Accept and open the workspace");
  accept.addEventListener("click", async () => {
    accept.disabled = true;
    result.replaceChildren(h("p", { class: "loading" }, "Accepting…"));
    try {
      const out = await platform(`/v1/workspaces/${workspaceId}/invitations/${invitationId}/accept`, { method: "POST", body: {} });
      result.replaceChildren(h("p", { class: "ok" }, `You joined as ${out.membership ? out.membership.role : "a member"}. Opening the workspace…`));
      await switchWorkspace(workspaceId);
      await reloadFrame();
      await navigate("/");
    } catch (err) {
      const code = err.problem && err.problem.code;
      const other = h("button", { type: "button", class: "secondary" }, "Sign out and use another account");
      other.addEventListener("click", async () => { location.assign((await sessionCall("/session/signout", {})).redirect_to); });
      result.replaceChildren(problemBox(err), code === "email_mismatch" || err.status === 403
        ? h("p", {}, `You are signed in as ${me.email}. The invitation is for another address: sign in with that address to accept.`, " ", other)
        : "");
      accept.disabled = false;
    }
  });
  let inv = null;
  try {
    inv = await platform(`/v1/workspaces/${workspaceId}/invitations/${invitationId}/preview`);
  } catch (err) {
    if (err.status !== 404) throw err;
  }
  if (!inv) {
    const other = h("button", { type: "button", class: "secondary", id: "use-other" }, "Sign out and use another account");
    other.addEventListener("click", async () => { location.assign((await sessionCall("/session/signout", {})).redirect_to); });
    parts.push(h("section", { "aria-label": "Invitation" },
      h("p", { id: "invite-not-found" }, "You are signed in as ", h("strong", { id: "accept-as" }, me.email || ""),
        ". No invitation at this link is open for this address: it may be for another address, revoked, or already used."), other));
    view.replaceChildren(...parts);
    return;
  }
  const pending = inv.status === "pending";
  parts[0] = h("h1", {}, `Join ${inv.workspace.name}`);
  parts.push(h("section", { "aria-label": "Invitation" },
    h("p", { id: "invite-summary" }, `${inv.invited_by.email || "An Admin"} invited you to `, h("strong", { id: "invite-workspace" }, inv.workspace.name),
      ` (data kept in ${inv.workspace.residency}) as `, h("strong", { id: "invite-role" }, inv.role), "."),
    h("p", {}, "You are signed in as ", h("strong", { id: "accept-as" }, me.email || ""), ". ",
      pending ? `The invitation is open until ${when(inv.expires_at)}.` : `This invitation is ${inv.status}: ask ${inv.invited_by.email || "an Admin"} for a new one.`),
    pending ? accept : "", result));
  view.replaceChildren(...parts);
}
