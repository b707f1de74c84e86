// Agents: list, create/edit definitions, start a run with input, watch its steps live (SSE),
// cancel it, and see past runs. Pages: agents, agent, agent_edit, run.
import { missing } from "../api.js";
import * as agents from "../agents_api.js";
import { h, field, form, table, section, badge, when, problemBox, empty } from "../dom.js";
import { allowed } from "../shell.js";

const message = (e) => (e && typeof e === "object" ? e.message || e.code || JSON.stringify(e) : e);
const KIND = { completed: "good", failed: "bad", cancelled: "warn", expired: "bad", in_progress: "warn", queued: "" };
const runBadge = (s) => badge(s, KIND[s] || "");
const unavailable = () => h("p", { class: "pending-api", id: "agents-unavailable" }, "Agents are not available on this deployment yet: the agents API (/v1/agents) does not answer.");

export async function render(ctx) {
  try {
    if (ctx.name === "agent") return await one(ctx);
    if (ctx.name === "agent_edit") return await edit(ctx);
    if (ctx.name === "run") return await run(ctx);
    return await list(ctx);
  } catch (err) {
    if (!missing(err)) throw err;
    ctx.view.replaceChildren(h("h1", {}, "Agents"), unavailable());
  }
}

async function list({ view, me }) {
  const page = await agents.listAgents();
  view.replaceChildren(h("h1", {}, "Agents"),
    allowed(me, "member") ? h("p", {}, h("a", { class: "button", href: "/agents/new" }, "New agent")) : null,
    section("Definitions", table("Agents", ["Name", "Model", "Tools", "Updated"], (page.agents || []).map((a) => [
      h("a", { href: `/agents/${encodeURIComponent(a.id)}` }, a.name), a.model, (a.tools || []).join(", "), when(a.updated_at || a.created_at)]), "No agents yet.")));
}

async function edit({ view, params, navigate }) {
  const current = params.agent_id ? await agents.getAgent(params.agent_id) : { name: "", instructions: "", model: "auto", tools: ["knowledge_search"], limits: {} };
  const limits = current.limits || {};
  const tools = agents.TOOLS.map((t) => h("input", { type: "checkbox", name: "tools", value: t, checked: (current.tools || []).includes(t) }));
  const plan = h("textarea", { name: "plan", rows: "5" }, current.plan ? JSON.stringify(current.plan, null, 2) : "");
  view.replaceChildren(h("h1", {}, params.agent_id ? `Edit ${current.name}` : "New agent"), h("section", { "aria-label": "Definition" }, form(async (data) => {
    const body = { name: String(data.get("name")).trim(), instructions: String(data.get("instructions")), model: String(data.get("model")).trim() || "auto",
      tools: data.getAll("tools"), limits: { max_steps: Number(data.get("max_steps")) || undefined, deadline: String(data.get("deadline")) || undefined, max_tokens: Number(data.get("max_tokens")) || undefined } };
    if (String(data.get("plan")).trim()) body.plan = JSON.parse(String(data.get("plan")));
    const saved = await agents.saveAgent(params.agent_id, body);
    await navigate(`/agents/${encodeURIComponent(saved.id || params.agent_id)}`);
  }, field("Name", h("input", { name: "name", value: current.name, required: true })),
  field("Instructions", h("textarea", { name: "instructions" }, current.instructions || "")),
  field("Model (a model id or auto)", h("input", { name: "model", value: current.model || "auto" })),
  h("fieldset", {}, h("legend", {}, "Allowed tools"), tools.map((t) => field(t.value, t))),
  field("Declared plan (JSON list of tool steps, optional)", plan),
  h("div", { class: "row" }, field("Max steps", h("input", { type: "number", name: "max_steps", value: limits.max_steps ?? "" })),
    field("Deadline (ISO 8601 duration)", h("input", { name: "deadline", value: limits.deadline ?? "" })),
    field("Max tokens", h("input", { type: "number", name: "max_tokens", value: limits.max_tokens ?? "" }))),
  h("button", { type: "submit" }, "Save"))));
}

async function one({ view, params, me, navigate }) {
  const a = await agents.getAgent(params.agent_id);
  const runs = await agents.listRuns(params.agent_id);
  const templated = JSON.stringify(a.plan || []).match(/\{\{input\.(\w+)\}\}/g) || [];
  const example = Object.fromEntries([...new Set(templated)].map((t) => [t.slice(8, -2), ""]));
  const input = h("textarea", { name: "input", id: "run-input", rows: "4" }, JSON.stringify(example));
  const canRun = allowed(me, "member");
  view.replaceChildren(h("h1", {}, a.name),
    section("Definition", h("dl", { class: "facts" }, h("dt", {}, "Model"), h("dd", {}, a.model), h("dt", {}, "Tools"), h("dd", {}, (a.tools || []).join(", ")),
      h("dt", {}, "Instructions"), h("dd", {}, a.instructions || "—"),
      h("dt", {}, "Plan"), h("dd", {}, a.plan && a.plan.length ? h("ol", {}, a.plan.map((p) => h("li", {}, `${p.name}: ${p.tool}`))) : "the model chooses the tools"),
      h("dt", {}, "Limits"), h("dd", {}, a.limits ? `${a.limits.max_steps} steps, deadline ${a.limits.deadline}, ${a.limits.max_tokens} tokens` : "—")),
    canRun ? h("p", {}, h("a", { class: "button secondary", href: `/agents/${encodeURIComponent(a.id)}/edit` }, "Edit"),
      h("button", { type: "button", class: "danger", onclick: async () => {
        if (!confirm(`Delete the agent ${a.name}? Its runs stay until deleted.`)) return;
        await agents.deleteAgent(a.id);
        await navigate("/agents");
      } }, "Delete")) : null),
    canRun ? section("Start a run", form(async (data) => {
      const started = await agents.startRun(a.id, JSON.parse(String(data.get("input") || "{}")));
      await navigate(`/agents/${encodeURIComponent(a.id)}/runs/${encodeURIComponent(started.id)}`);
    }, field("Input (JSON object)", input, "Values the plan's {{input.…}} templates use."), h("button", { type: "submit", id: "start-run" }, "Start run"))) : null,
    section("Past runs", table("Runs", ["Run", "Status", "Started", "Finished"], (runs.runs || runs.items || []).map((r) => [
      h("a", { href: `/agents/${encodeURIComponent(a.id)}/runs/${encodeURIComponent(r.id)}` }, r.id), runBadge(r.status), when(r.created_at || r.queued_at), when(r.finished_at)]), "No runs yet.")));
}

const TERMINAL = ["completed", "failed", "cancelled", "expired"];

// the run's usage is written when it finishes; until then the steps done so far are counted
function usageText(r) {
  if (TERMINAL.includes(r.status) && r.usage) return `${r.usage.steps ?? 0} steps, ${r.usage.tool_calls ?? 0} tool calls`;
  const done = (r.steps || []).filter((s) => s.status === "completed").length;
  return r.status === "in_progress" ? `${done} ${done === 1 ? "step" : "steps"} done so far` : "";
}

async function run({ view, params }) {
  let r = await agents.getRun(params.agent_id, params.run_id);
  const status = h("p", { id: "run-status", role: "status" }, runBadge(r.status));
  const steps = h("ol", { class: "steps", id: "run-steps", "aria-live": "polite" });
  const output = h("div", { id: "run-output" });
  const stepView = (s) => h("li", { "data-status": s.status }, h("strong", {}, `${s.name || ""} (${s.tool})`), ` ${s.status || ""}`,
    s.duration_ms !== undefined && s.duration_ms !== null ? ` · ${Math.round(s.duration_ms)} ms` : "", " ",
    s.error ? h("span", { class: "error" }, message(s.error)) : null,
    h("details", {}, h("summary", {}, "Input and output"), h("pre", { class: "mono" }, JSON.stringify({ input: s.input, output: s.output }, null, 2))));
  const cancel = h("button", { type: "button", class: "danger", id: "cancel-run" }, "Cancel run");
  const drawAll = () => {
    if (TERMINAL.includes(r.status)) cancel.remove(); // a finished run offers no cancel, from the moment it shows finished
    status.replaceChildren(runBadge(r.status), r.error ? h("span", { class: "error" }, ` ${message(r.error)}`) : "",
      usageText(r) ? h("span", { class: "meta", id: "run-usage" }, ` · ${usageText(r)}`) : "");
    steps.replaceChildren(...(r.steps || []).map(stepView));
    const out = r.output;
    output.replaceChildren(out ? h("div", {},
      out.answer ? h("p", { class: "answer", id: "run-answer" }, out.answer) : null,
      out.note ? h("p", { class: "note" }, out.note) : null,
      h("details", {}, h("summary", {}, "Full output"), h("pre", { class: "mono" }, typeof out === "string" ? out : JSON.stringify(out, null, 2))))
      : empty(TERMINAL.includes(r.status) ? "This run has no output." : "No output yet."));
  };
  const cancelled = h("span", { class: "action-result", role: "status" });
  cancel.addEventListener("click", async () => {
    cancel.disabled = true;
    try {
      r = { ...r, ...(await agents.cancelRun(params.agent_id, params.run_id)) };
      drawAll();
      if (!TERMINAL.includes(r.status)) cancelled.textContent = "Stopping after the current step…"; // a queued run is cancelled at once
    } catch (err) { cancelled.replaceChildren(problemBox(err)); cancel.disabled = false; }
  });
  view.replaceChildren(h("h1", {}, `Run ${r.id}`), section("Status", status, TERMINAL.includes(r.status) ? null : [cancel, cancelled]),
    section("Steps", steps), section("Output", output));
  drawAll();
  // the page is ready (not busy) once drawn; its steps then stream in, announced by the live list
  follow().catch((err) => { if (view.isConnected) view.append(problemBox(err)); }).finally(() => cancel.remove());

  async function follow() {
    let lastId = "";
    while (!TERMINAL.includes(r.status) && view.isConnected) {
      try {
        for await (const ev of agents.runEvents(params.agent_id, params.run_id, lastId)) {
          lastId = ev.id || lastId;
          r = await agents.getRun(params.agent_id, params.run_id);
          drawAll();
          if (TERMINAL.includes(r.status)) break;
        }
      } catch (err) {
        view.append(problemBox(err));
        return;
      }
      r = await agents.getRun(params.agent_id, params.run_id);
      drawAll();
      if (!TERMINAL.includes(r.status)) await new Promise((res) => setTimeout(res, 1000));
    }
  }
}
