// The invitation e-mail's link: /invitations/accept?workspace_id=...&invitation_id=...
// A new user arrives here after signing up at the identity service (the deep link survives sign-in);
// an existing user after signing in. Accepting needs the invited, verified address.
import { platform, sessionCall } from "../api.js";
import { h, problemBox } from "../dom.js";
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
  parts.push(h("section", { "aria-label": "Invitation" },
    h("p", {}, "You are signed in as ", h("strong", { id: "accept-as" }, me.email || ""), ". Accept the invitation to join the workspace with the role the inviter chose."),
    accept, result));
  view.replaceChildren(...parts);
}
