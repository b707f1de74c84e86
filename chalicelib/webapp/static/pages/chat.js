// Chat: model selector (with why a model is or is not offered), streamed answers, citations that
// open the cited passage or record, conversation list with delete, and the routing explanation.
import { missing } from "../api.js";
import { listModels, listChats, getChat, deleteChat, ask } from "../chat_api.js";
import { isAdmin } from "../shell.js";
import { h, field, form, section, problemBox, loading, badge, empty, announce } from "../dom.js";

export function citationView(c, i) {
  const src = c.source || {};
  const n = c.ref || i + 1;
  const datasetId = src.dataset_id || (src.kind === "dataset" ? src.id : "");
  const span = c.span ? `${c.span.start}–${c.span.end}` : "";
  return h("details", { class: "citation", id: `citation-${n}` },
    h("summary", {}, `[${n}] ${c.title || src.dataset_name || src.id || ""}`, " ", badge(src.kind || "source"),
      c.verified ? [" ", badge("quote verified", "good")] : null),
    h("blockquote", { class: "quote" }, c.quote || ""),
    h("p", { class: "meta" }, `${src.kind || ""} ${src.id || ""} · snapshot ${c.version || "—"} · chunk ${c.chunk_id || "—"} · characters ${span}`),
    datasetId ? h("p", {}, h("a", { href: `/knowledge/datasets/${encodeURIComponent(datasetId)}` }, `Open ${src.dataset_name || "the dataset"}`)) : null);
}

function routingView(r) {
  if (!r) return null;
  return h("details", { class: "routing" }, h("summary", {}, `Routed to ${r.chosen || "?"}`),
    h("p", {}, r.reason || ""),
    r.excluded && r.excluded.length ? h("ul", {}, r.excluded.map((x) => h("li", {}, `${x.model}: ${x.reason}`))) : null);
}

// What the grounding says beside an answer: the reply's notice (no generative model, low grounding,
// no support) and the sentences it could not find in the sources.
function groundingView(reply) {
  const g = reply.grounding || {};
  const shownIn = g.spans_of === "unverified_answer" ? (reply.unverified_answer || "") : (reply.content || "");
  const unsupported = (g.per_sentence || []).filter((s) => s.status === "unsupported").map((s) => shownIn.slice(s.start, s.end).trim()).filter(Boolean);
  return h("div", { class: "grounding" },
    reply.notice ? h("p", { class: "note", role: "note", "data-notice": reply.notice.code }, reply.notice.message) : null,
    unsupported.length ? h("details", { class: "unsupported-sentences" }, h("summary", {}, `${unsupported.length} sentence(s) not supported by your sources`),
      h("ul", {}, unsupported.map((t) => h("li", {}, t)))) : null);
}

export async function render({ view, params, navigate, me }) {
  const chatId = params.chat_id || "";
  view.replaceChildren(h("h1", {}, "Chat"), loading());
  let models;
  try {
    models = (await listModels()).items || [];
  } catch (err) {
    view.replaceChildren(h("h1", {}, "Chat"), missing(err)
      ? h("p", { class: "pending-api", id: "chat-unavailable" }, "Chat is not available on this deployment yet: the model API (GET /v1/models) does not answer.")
      : problemBox(err));
    return;
  }
  const select = h("select", { name: "model", id: "model" }, h("option", { value: "auto" }, "auto — choose for me"),
    models.map((m) => h("option", { value: m.id }, `${m.name || m.id} · ${m.provider} · ${m.region}${m.kind === "extractive" ? " (extractive, quotes sources)" : ""}`)));
  const thread = h("ol", { class: "messages", id: "messages", "aria-live": "polite" });
  const history = [];
  let current = chatId;
  if (chatId) {
    const chat = await getChat(chatId);
    for (const m of chat.messages || []) {
      history.push({ role: m.role, content: m.content });
      thread.append(h("li", { class: m.role }, m.content, (m.citations || []).length ? h("div", { class: "citations" }, m.citations.map(citationView)) : null));
    }
  }
  const prompt = h("textarea", { name: "prompt", id: "prompt", rows: "3", required: true });
  const composer = form(async (data, status) => {
    const text = String(data.get("prompt") || "").trim();
    if (!text) return;
    history.push({ role: "user", content: text });
    if (emptyNote) emptyNote.remove();
    thread.append(h("li", { class: "user" }, text));
    const answer = h("p", { class: "answer" });
    const extra = h("div", {});
    thread.append(h("li", { class: "assistant" }, answer, extra));
    prompt.value = "";
    status.replaceChildren(h("span", { class: "loading" }, "Answering…"));
    const reply = await ask({ model: select.value, messages: history, chatId: current }, (ev) => {
      if (ev.type === "content_delta") answer.textContent = ev.reply.content;
    }).catch((err) => { history.pop(); answer.replaceChildren(problemBox(err)); throw err; });
    answer.textContent = reply.content;
    history.push({ role: "assistant", content: reply.content });
    extra.replaceChildren(
      groundingView(reply),
      reply.citations.length ? h("div", { class: "citations" }, h("h3", {}, "Sources"), reply.citations.map(citationView)) : null,
      routingView(reply.routing),
      h("p", { class: "meta" }, [reply.model, reply.provider, reply.region].filter(Boolean).join(" · "),
        reply.grounding && reply.grounding.ratio !== undefined ? ` · ${Math.round(reply.grounding.ratio * 100)}% of sentences backed by a verified quote` : ""));
    status.replaceChildren();
    announce("Answer complete.");
    if (!current && reply.chat_id) { current = reply.chat_id; window.history.replaceState(null, "", `/chat/${encodeURIComponent(current)}`); drawList(); }
  }, field("Model", select, "Only models allowed for this workspace's residency and your role are offered."),
  field("Message", prompt), h("button", { type: "submit", id: "send" }, "Send"));

  const emptyNote = thread.children.length ? null : empty("Ask about your workspace's data and documents.");
  const list = h("div", {}, loading());
  async function drawList() {
    try {
      const page = await listChats();
      const chats = page.items || [];
      list.replaceChildren(chats.length ? h("ul", { class: "chat-list" }, chats.map((c) => h("li", {},
        h("a", { href: `/chat/${encodeURIComponent(c.id)}`, "aria-current": c.id === current ? "page" : null }, c.title || c.id), " ",
        h("button", { type: "button", class: "small secondary", "aria-label": `Delete ${c.title || c.id}`, onclick: async () => {
          if (!confirm("Delete this conversation?")) return;
          await deleteChat(c.id);
          if (c.id === current) await navigate("/chat"); else drawList();
        } }, "Delete")))) : empty("No conversations yet."));
    } catch (err) { list.replaceChildren(problemBox(err)); }
  }
  const generative = models.some((m) => m.kind === "generative");
  const noModel = generative ? null : h("p", { class: "note", id: "no-generative-model", role: "note" },
    "No generative model is connected: answers quote your sources instead of being written by a model. ",
    isAdmin(me) ? h("a", { href: "/models" }, "Connect a model") : "Ask an Admin to connect one on the Models page",
    " (any OpenAI-compatible endpoint, or a Bedrock model in this workspace's region).");
  view.replaceChildren(h("h1", {}, "Chat"), noModel, h("div", { class: "chat" },
    section("Conversations", h("a", { href: "/chat", class: "button secondary" }, "New conversation"), list),
    h("div", {}, section("Conversation", emptyNote, thread, composer),
      section("Models offered here", h("ul", { id: "models" }, models.map((m) => h("li", {}, h("strong", {}, m.name || m.id), ` (${m.provider}, ${m.region}): ${m.available_because || ""}`))),
        h("p", { class: "note" }, "Models without an endpoint in this workspace's region, or not on your role's allow-list, are not offered; each answer's routing note names the models it excluded and why."))))); 
  await drawList();
}
