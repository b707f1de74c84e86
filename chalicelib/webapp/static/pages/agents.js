// Agents: list, create/edit definitions, start a run with input, watch its steps live (SSE),
// cancel it, and see past runs. Pages: agents, agent, agent_edit, run.
import { gateway, missing, platform } from "../api.js";
import * as agents from "../agents_api.js";
import { h, field, form, table, section, badge, when, problemBox, empty, humanDuration } from "../dom.js";
import { allowed } from "../shell.js";
import { renderMarkdown } from "../chat_api.js";

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
    allowed(me, "member") ? h("p", {}, h("a", { class: "button", href: "/agents/new" }, "New agent")) : "",
    section("Definitions", table("Agents", ["Name", "Model", "Tools", "Updated"], (page.agents || []).map((a) => [
      h("a", { href: `/agents/${encodeURIComponent(a.id)}` }, a.name), a.model, (a.tools || []).join(", "), when(a.updated_at || a.created_at)]), "No agents yet.")));
}

// The workspace's datasets the user may read, by id (paged through the catalog; at most a few pages).
async function readableDatasets() {
  const found = new Map();
  let after;
  for (let i = 0; i < 10; i += 1) {
    const page = await gateway("/v1/catalog/datasets", { query: { limit: 100, after } });
    for (const d of page.items || []) found.set(d.id, d);
    if (!page.has_more || !page.next_cursor) break;
    after = page.next_cursor;
  }
  return found;
}

const SEARCH_FROM = 8; // more datasets than this: a filter box above the list

// The datasets fieldset: one labelled checkbox per readable dataset, ticked ones first kept as they are;
// an id the definition holds that the user cannot see (deleted, or out of the user's reach) stays ticked.
function datasetChoices(readable, chosen, failed) {
  const ticked = new Set(chosen);
  const box = (id, label, hint) => field(label, h("input", { type: "checkbox", name: "datasets", value: id, checked: ticked.has(id) }), hint);
  const rows = [...readable.values()].sort((x, y) => x.name.localeCompare(y.name)).map((d) => {
    const row = box(d.id, d.name, [d.classification, d.description].filter(Boolean).join(" · ") || null);
    row.dataset.name = d.name.toLowerCase();
    return row;
  });
  const unseen = chosen.filter((id) => !readable.has(id)).map((id) => box(id, `A dataset you cannot see (${id})`, "Deleted, or you may not read it. Untick it to remove it; while it stays, runs skip it."));
  const list = h("div", { class: "choices", id: "agent-datasets" }, rows, unseen);
  const filter = h("input", { type: "search", id: "agent-datasets-filter", placeholder: "Type part of a name" });
  filter.addEventListener("input", () => {
    const q = filter.value.trim().toLowerCase();
    for (const row of rows) row.hidden = !!q && !row.dataset.name.includes(q);
  });
  return h("fieldset", {}, h("legend", {}, "Datasets it may read"),
    h("p", { class: "hint" }, "Tick the datasets this agent may use. None ticked: every dataset the person running it may read. Either way it never reads what that person may not."),
    failed ? problemBox(failed) : "",
    rows.length > SEARCH_FROM ? field("Filter datasets", filter) : "",
    rows.length || unseen.length ? list : failed ? "" : empty("You may read no dataset in this workspace yet."));
}

const DEADLINES = [["PT30S", "30 seconds"], ["PT1M", "1 minute"], ["PT2M", "2 minutes"], ["PT5M", "5 minutes"], ["PT15M", "15 minutes"], ["PT1H", "1 hour"]];

// The builder: name, instructions, model, tools ticked, limits in words; the plan editor is advanced.
async function edit({ view, params, navigate }) {
  // the definition, the models and the catalog are read at once
  const catalog = readableDatasets().then((found) => [found, null], (err) => [new Map(), err]);
  const offered = platform("/v1/models").then((body) => body.items || [], () => []);
  const catalogue = agents.listTools();
  const current = params.agent_id ? await agents.getAgent(params.agent_id) : { name: "", instructions: "", model: "auto", tools: ["knowledge_search"], datasets: [], limits: {} };
  const limits = current.limits || {};
  const models = await offered;
  const toolModels = models.filter((m) => m.capabilities && m.capabilities.tool_use);
  const model = h("select", { name: "model", id: "agent-model" }, h("option", { value: "auto" }, "auto (chosen for each run)"),
    models.map((m) => h("option", { value: m.id, selected: m.id === current.model }, `${m.name || m.id} · ${m.provider}`)),
    current.model && current.model !== "auto" && !models.some((m) => m.id === current.model) ? h("option", { value: current.model, selected: true }, current.model) : "");
  const tools = (await catalogue).map((t) => field(t.title, h("input", { type: "checkbox", name: "tools", value: t.name, checked: (current.tools || []).includes(t.name) }), t.summary));
  const [readable, failed] = await catalog; // on failure the ticked ones stay ticked
  const datasets = datasetChoices(readable, current.datasets || [], failed);
  const plan = h("textarea", { name: "plan", id: "agent-plan", rows: "6" }, current.plan ? JSON.stringify(current.plan, null, 2) : "");
  const deadline = h("select", { name: "deadline" }, h("option", { value: "" }, "the platform's default"),
    DEADLINES.map(([v, w]) => h("option", { value: v, selected: limits.deadline === v }, w)));
  view.replaceChildren(h("h1", {}, params.agent_id ? `Edit ${current.name}` : "New agent"), h("section", { "aria-label": "Definition" }, form(async (data) => {
    const body = { name: String(data.get("name")).trim(), instructions: String(data.get("instructions")), model: String(data.get("model")) || "auto",
      tools: data.getAll("tools"), datasets: data.getAll("datasets"), limits: {} };
    if (!body.name) throw new Error("Give the agent a name.");
    if (!body.tools.length) throw new Error("Tick at least one thing the agent may do.");
    if (Number(data.get("max_steps"))) body.limits.max_steps = Number(data.get("max_steps"));
    if (data.get("deadline")) body.limits.deadline = String(data.get("deadline"));
    if (Number(data.get("max_tokens"))) body.limits.max_tokens = Number(data.get("max_tokens"));
    const planText = String(data.get("plan") || "").trim();
    if (planText) {
      try { body.plan = JSON.parse(planText); } catch (err) { throw new Error(`The plan is not valid JSON (${err.message}). Leave it empty to let the agent choose its steps.`); }
    } else if (params.agent_id && current.plan) body.plan = null;
    const saved = await agents.saveAgent(params.agent_id, body);
    await navigate(`/agents/${encodeURIComponent(saved.id || params.agent_id)}`);
  }, field("Name", h("input", { name: "name", value: current.name, required: true, maxlength: "100" })),
  field("Instructions", h("textarea", { name: "instructions", id: "agent-instructions" }, current.instructions || ""), "What the agent is for and how it should answer, in plain words."),
  field("Model", model, "Only models allowed for this workspace and your role are listed."),
  toolModels.length ? "" : noToolModel(),
  h("fieldset", {}, h("legend", {}, "What it may do"), h("p", { class: "hint" }, "It acts with your access rights: it reads only the data you may read."), tools),
  datasets,
  h("div", { class: "row" }, field("Most steps per run", h("input", { type: "number", min: "1", name: "max_steps", value: limits.max_steps ?? "" }), "Empty: the platform's default."),
    field("Time limit per run", deadline),
    field("Token budget per run", h("input", { type: "number", min: "1", name: "max_tokens", value: limits.max_tokens ?? "" }))),
  h("details", { class: "advanced" }, h("summary", {}, "Advanced: a fixed plan of steps"),
    field("Plan (JSON list of steps; empty: the agent chooses)", plan, 'Each step: {"name": "search", "tool": "knowledge_search", "input": {"query": "{{input.question}}"}}.')),
  h("button", { type: "submit", id: "save-agent" }, "Save"))));
}

// Without a model that calls tools, a run follows its plan (or searches the documents) and quotes the
// step outputs; the builder says so before the agent is saved, and where a model is connected.
const noToolModel = () => h("div", { class: "notice", id: "agent-no-tool-model", role: "note" },
  h("p", {}, h("strong", {}, "No tool-capable model is connected. "),
    "Without one, this agent cannot choose its own steps: a run follows its fixed plan (or searches the documents) and answers by quoting what the steps found."),
  h("p", {}, "To connect one, an Admin adds a model that supports tool use on the ", h("a", { href: "/models" }, "Models page"),
    " (any OpenAI-compatible endpoint or a Bedrock model in this workspace's region)."));

async function one({ view, params, me, navigate }) {
  // the definition, its runs and the catalog are read at once (the catalog is only used when it names datasets)
  const catalog = readableDatasets().catch(() => new Map());
  const [a, runs] = await Promise.all([agents.getAgent(params.agent_id), agents.listRuns(params.agent_id)]);
  const named = a.datasets || [];
  const readable = named.length ? await catalog : new Map();
  const datasetNames = named.length ? h("ul", { id: "agent-dataset-list" }, named.map((id) => h("li", {}, readable.has(id) ? readable.get(id).name : `a dataset you cannot see (${id})`)))
    : "every dataset the person running it may read";
  const templated = JSON.stringify(a.plan || []).match(/\{\{input\.(\w+)\}\}/g) || [];
  const names = [...new Set(templated.map((t) => t.slice(8, -2)))].filter((n) => n !== "question");
  const question = h("textarea", { name: "question", id: "run-question", rows: "3", required: true });
  const extra = names.map((n) => field(n.replace(/_/g, " "), h("input", { name: `input.${n}`, "data-input": n })));
  const canRun = allowed(me, "member");
  view.replaceChildren(h("h1", {}, a.name),
    section("Definition", h("dl", { class: "facts" }, h("dt", {}, "Model"), h("dd", {}, a.model), h("dt", {}, "Tools"), h("dd", {}, (a.tools || []).join(", ")),
      h("dt", {}, "Datasets"), h("dd", {}, datasetNames),
      h("dt", {}, "Instructions"), h("dd", {}, a.instructions || "—"),
      h("dt", {}, "Plan"), h("dd", {}, a.plan && a.plan.length ? h("ol", {}, a.plan.map((p) => h("li", {}, `${p.name}: ${p.tool}`))) : "the model chooses the tools"),
      h("dt", {}, "Limits"), h("dd", {}, a.limits ? `at most ${a.limits.max_steps} steps, ${humanDuration(a.limits.deadline)}, ${a.limits.max_tokens} tokens` : "the platform's defaults"),
      h("dt", {}, "Last edited"), h("dd", { id: "agent-edited" }, `${when(a.updated_at || a.created_at)} by ${(a.updated_by && a.updated_by.email) || "its creator"} (version ${a.version})`)),
    canRun ? h("p", {}, h("a", { class: "button secondary", href: `/agents/${encodeURIComponent(a.id)}/edit` }, "Edit"),
      h("button", { type: "button", class: "danger", onclick: async () => {
        if (!confirm(`Delete the agent ${a.name}? Its runs stay until deleted.`)) return;
        await agents.deleteAgent(a.id);
        await navigate("/agents");
      } }, "Delete")) : null),
    canRun ? section("Ask the agent", form(async (data, out) => {
      const input = { question: String(data.get("question") || "").trim() };
      if (!input.question) throw new Error("Type a question first.");
      for (const n of names) input[n] = String(data.get(`input.${n}`) || "");
      const advanced = String(data.get("input_json") || "").trim();
      if (advanced) {
        try { Object.assign(input, JSON.parse(advanced)); } catch (err) { throw new Error(`The extra input is not valid JSON (${err.message}).`); }
      }
      const started = await agents.startRun(a.id, input, a.version);  // refused if edited since this page was read
      out.replaceChildren();
      await navigate(`/agents/${encodeURIComponent(a.id)}/runs/${encodeURIComponent(started.id)}`);
    }, field("Question", question), extra,
    h("details", { class: "advanced" }, h("summary", {}, "Advanced: more input as JSON"), field("Extra input (JSON object, optional)", h("textarea", { name: "input_json", id: "run-input", rows: "3" }))),
    h("button", { type: "submit", id: "start-run" }, "Run"))) : "",
    section("Past runs", table("Runs", ["Run", "Status", "Started", "Finished"], (runs.runs || runs.items || []).map((r) => [
      h("a", { href: `/agents/${encodeURIComponent(a.id)}/runs/${encodeURIComponent(r.id)}` }, `Run of ${when(r.created_at || r.queued_at)}`), runBadge(r.status), when(r.created_at || r.queued_at), when(r.finished_at)]), "No runs yet.")));
}

const TERMINAL = ["completed", "failed", "cancelled", "expired"];

const count = (n, word) => `${n ?? 0} ${(n ?? 0) === 1 ? word : word + "s"}`;

// the run's usage is written when it finishes; until then the steps done so far are counted
function usageText(r) {
  if (TERMINAL.includes(r.status) && r.usage) return `${count(r.usage.steps, "step")}, ${count(r.usage.tool_calls, "tool call")}`;
  const done = (r.steps || []).filter((s) => s.status === "completed").length;
  return r.status === "in_progress" ? `${count(done, "step")} done so far` : "";
}

// Sanitised HTML from the app's server (markdown-it-py + nh3), parsed inert (a template), then moved in.
function htmlNode(html) {
  const t = document.createElement("template");
  t.innerHTML = html;
  return t.content;
}

// A run is named for people: its agent and when it started (or was queued).
const runName = (agentName, r) => `${agentName || "Agent"} · ${when(r.started_at || r.created_at)}`;

async function run({ view, params }) {
  // the run and its agent's name are read at once (the agent may be gone: the run keeps a plain name)
  const [first, agent] = await Promise.all([agents.getRun(params.agent_id, params.run_id), agents.getAgent(params.agent_id).catch(() => null)]);
  let r = first;
  const status = h("p", { id: "run-status", role: "status" }, runBadge(r.status));
  const steps = h("ol", { class: "steps", id: "run-steps", "aria-live": "polite" });
  const output = h("div", { id: "run-output" });
  // each step folds: its summary line (name, tool, status, time) opens to its input and output
  const open = new Set(); // steps the reader opened stay open while the list is redrawn
  const stepView = (s, i) => {
    const key = `${i}:${s.name || s.tool}`;
    const box = h("details", { class: "step", open: open.has(key) },
      h("summary", {}, h("strong", {}, `${s.name || ""} (${s.tool})`), ` ${s.status || ""}`,
        s.duration_ms !== undefined && s.duration_ms !== null ? ` · ${Math.round(s.duration_ms)} ms` : ""),
      s.error ? h("p", { class: "error" }, message(s.error)) : null,
      s.withheld ? h("p", { class: "note" }, s.withheld.message)
        : h("pre", { class: "mono", tabindex: "0" }, JSON.stringify({ input: s.input, output: s.output }, null, 2))); // scrolls: reachable by keyboard
    box.addEventListener("toggle", () => { if (box.open) open.add(key); else open.delete(key); });
    return h("li", { "data-status": s.status }, box);
  };
  // the answer is Markdown: shown as text at once, then as the server's sanitised HTML (rendered once)
  let rendered = { text: null, html: null };
  const answerView = (text) => {
    const box = h("div", { class: "answer markdown", id: "run-answer" });
    if (rendered.text === text && rendered.html !== null) box.append(htmlNode(rendered.html));
    else {
      box.append(h("p", {}, text));
      renderMarkdown([text]).then(([html]) => {
        rendered = { text, html };
        box.replaceChildren(htmlNode(html));
      }).catch(() => {}); // the plain text stays
    }
    return box;
  };
  const cancel = h("button", { type: "button", class: "danger", id: "cancel-run" }, "Cancel run");
  const drawAll = () => {
    if (TERMINAL.includes(r.status)) cancel.remove(); // a finished run offers no cancel, from the moment it shows finished
    status.replaceChildren(runBadge(r.status), r.error ? h("span", { class: "error" }, ` ${message(r.error)}`) : "",
      usageText(r) ? h("span", { class: "meta", id: "run-usage" }, ` · ${usageText(r)}`) : "");
    steps.replaceChildren(...(r.steps || []).map((s, i) => stepView(s, i)));
    const out = r.output;
    output.replaceChildren(out ? h("div", {},
      out.answer ? answerView(out.answer) : null,
      out.note ? h("p", { class: "note" }, out.note) : null,
      h("details", {}, h("summary", {}, "Full output"), h("pre", { class: "mono", tabindex: "0" }, typeof out === "string" ? out : JSON.stringify(out, null, 2))))
      : r.withheld ? h("p", { class: "note", id: "run-withheld" }, r.withheld.message)
      : empty(TERMINAL.includes(r.status) ? "This run has no output." : "No output yet."));
  };
  // answers may arrive out of order (a read sent before Cancel can land after it): the page never steps back
  const RANK = { queued: 0, in_progress: 1 };
  const rank = (s) => (TERMINAL.includes(s) ? 2 : RANK[s] ?? 0);
  const show = (next) => {
    if (rank(next.status) < rank(r.status)) return;
    r = next;
    drawAll();
  };
  const cancelled = h("span", { class: "action-result", role: "status" });
  cancel.addEventListener("click", async () => {
    cancel.disabled = true;
    try {
      show({ ...r, ...(await agents.cancelRun(params.agent_id, params.run_id)) });
      if (!TERMINAL.includes(r.status)) cancelled.textContent = "Stopping after the current step…"; // a queued run is cancelled at once
    } catch (err) { cancelled.replaceChildren(problemBox(err)); cancel.disabled = false; }
  });
  view.replaceChildren(h("h1", { id: "run-name" }, runName(agent && agent.name, r)), h("p", { class: "meta" }, "Run ", h("code", {}, r.id)), section("Status", status, TERMINAL.includes(r.status) ? null : [cancel, cancelled]),
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
          show(await agents.getRun(params.agent_id, params.run_id));
          if (TERMINAL.includes(r.status)) break;
        }
      } catch (err) {
        view.append(problemBox(err));
        return;
      }
      show(await agents.getRun(params.agent_id, params.run_id));
      if (!TERMINAL.includes(r.status)) await new Promise((res) => setTimeout(res, 1000));
    }
  }
}
