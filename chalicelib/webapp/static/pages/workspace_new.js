// Create a workspace (the caller becomes its Admin), then switch to it by token exchange.
import { platform, idempotencyKey } from "../api.js";
import { h, field, form } from "../dom.js";
import { switchWorkspace } from "../shell.js";

const RESIDENCY = [
  ["us-east", "United States (us-east) — default"],
  ["eu-central", "European Union (eu-central) — all storage, processing and model inference stay in the EU"],
  ["br-south", "Brazil (br-south) — planned, not open yet"],
];

export async function render({ view, reloadFrame, navigate }) {
  const name = h("input", { name: "name", required: true, maxlength: "100", autocomplete: "organization" });
  const residency = h("select", { name: "residency" }, RESIDENCY.map(([v, l]) => h("option", { value: v }, l)));
  const mfa = h("input", { type: "checkbox", name: "enforce_mfa" });
  const brNote = h("p", { class: "note", id: "br-south-note", hidden: true },
    "br-south is planned and not open yet. Until it opens, choose us-east (served under standard contractual ",
    "clauses) or pin the workspace to eu-central. Residency cannot be changed after creation.");
  residency.addEventListener("change", () => { brNote.hidden = residency.value !== "br-south"; });
  const el = form(async (data, status) => {
    const ws = await platform("/v1/workspaces", { method: "POST", headers: { "Idempotency-Key": idempotencyKey() },
      body: { name: String(data.get("name") || "").trim(), residency: data.get("residency"), enforce_mfa: mfa.checked } });
    status.replaceChildren(h("p", { class: "ok" }, `Created ${ws.name} (${ws.residency}). Switching to it…`));
    await switchWorkspace(ws.id);
    await reloadFrame();
    await navigate("/");
  },
  field("Name", name),
  field("Residency", residency, "Where the workspace's content is stored and processed; chosen once, it cannot be changed later."),
  brNote,
  field("Require multi-factor authentication for every member", mfa),
  h("button", { type: "submit" }, "Create workspace"));
  view.replaceChildren(h("h1", {}, "Create a workspace"), h("section", { "aria-label": "New workspace" }, el));
}
