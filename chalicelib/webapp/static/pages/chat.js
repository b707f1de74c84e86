// Chat: answers rendered from Markdown (sanitised by the app's server), shown as they stream with a
// Stop button; copy, thumbs up/down, regenerate, edit and resend; citations numbered in order of use,
// each opening its passage (with its page) in a side panel; sentences the grounding marks unsupported
// are flagged; conversations renamed, searched (server side: the list shows only the matches) and
// deleted; documents attached from the chat box go to the workspace's knowledge. Code blocks come
// highlighted from the server and get a copy button here. The messages scroll under a composer that
// stays at the bottom of the window; on a phone the conversation list is a drawer.
import { missing } from "../api.js";
import { listModels, listChats, searchChats, getChat, deleteChat, renameChat, rate, ask, follow, stopAnswer, renderMarkdown } from "../chat_api.js";
import { mountChatOptions, originLabel, groundingText } from "../chat_options.js";
import { h, field, form, section, problemBox, loading, badge, empty, announce, action } from "../dom.js";
import { isAdmin } from "../shell.js";
import { ACCEPT, uploadConnector, uploadFiles } from "../uploads.js";

// Citations renumbered 1, 2, 3 in the order the answer first uses them (each source once), and the
// answer's markers rewritten to match; citations the text never names come last.
export function numberCitations(content, citations) {
  const byRef = new Map();
  for (const c of citations || []) if (!byRef.has(c.ref)) byRef.set(c.ref, c);
  const order = new Map();
  for (const m of String(content || "").matchAll(/\[(\d+)\]/g)) {
    const ref = Number(m[1]);
    if (byRef.has(ref) && !order.has(ref)) order.set(ref, order.size + 1);
  }
  for (const ref of byRef.keys()) if (!order.has(ref)) order.set(ref, order.size + 1);
  const text = String(content || "").replace(/\[(\d+)\]/g, (all, n) => (order.has(Number(n)) ? `[${order.get(Number(n))}]` : all));
  const list = [...order.entries()].sort((a, b) => a[1] - b[1]).map(([ref, n]) => ({ ...byRef.get(ref), n }));
  return { text, list };
}

const sourceTitle = (c) => c.title || (c.source && (c.source.dataset_name || "source")) || "source";

// The passage of one citation in the side panel: title (with page), the verified quote, its dataset.
function openPassage(panel, c) {
  const src = c.source || {};
  const datasetId = src.dataset_id || (src.kind === "dataset" ? src.id : "");
  const close = h("button", { type: "button", class: "small secondary", id: "close-passage" }, "Close");
  close.addEventListener("click", () => { panel.hidden = true; panel.replaceChildren(); });
  panel.replaceChildren(h("h2", { id: "passage-title", tabindex: "-1" }, `[${c.n}] ${sourceTitle(c)}`),
    h("p", {}, badge(src.kind === "document" ? "document" : "dataset row"), c.verified ? [" ", badge("quote verified", "good")] : ""),
    h("blockquote", { class: "quote", id: "passage-quote" }, c.quote || ""),
    datasetId ? h("p", {}, h("a", { href: `/knowledge/datasets/${encodeURIComponent(datasetId)}` }, `Open ${src.dataset_name || "the dataset"}`)) : "",
    close);
  panel.hidden = false;
  panel.querySelector("#passage-title").focus();
}

export function citationView(c, panel) {
  const src = c.source || {};
  const datasetId = src.dataset_id || (src.kind === "dataset" ? src.id : "");
  const open = h("button", { type: "button", class: "small secondary" }, "Show passage");
  open.addEventListener("click", () => openPassage(panel, c));
  return h("details", { class: "citation", id: `citation-${c.n}` },
    h("summary", {}, `[${c.n}] ${sourceTitle(c)}`, " ", badge(src.kind === "document" ? "document" : "dataset row"),
      c.verified ? [" ", badge("quote verified", "good")] : ""),
    h("blockquote", { class: "quote" }, c.quote || ""),
    h("p", {}, open, datasetId ? [" ", h("a", { href: `/knowledge/datasets/${encodeURIComponent(datasetId)}` }, `Open ${src.dataset_name || "the dataset"}`)] : ""));
}

function routingView(r) {
  if (!r) return "";
  return h("details", { class: "routing" }, h("summary", {}, `Answered by ${r.chosen || "the chosen model"}: why`),
    h("p", {}, r.reason || ""),
    r.excluded && r.excluded.length ? h("ul", {}, r.excluded.map((x) => h("li", {}, `${x.model}: ${x.reason}`))) : "");
}

// Sentences without support, from the answer's grounding when it carries them per sentence.
function unsupportedSentences(grounding, content) {
  if (!grounding) return [];
  const out = [];
  if (Array.isArray(grounding.per_sentence) && grounding.spans_of !== "unverified_answer") {
    for (const s of grounding.per_sentence) {
      if (s && s.status === "unsupported") out.push(String(content || "").slice(s.start, s.end).replace(/\[\d+\]/g, "").trim());
    }
  }
  if (Array.isArray(grounding.unsupported)) for (const u of grounding.unsupported) out.push(typeof u === "string" ? u : u && u.text);
  if (Array.isArray(grounding.sentences)) {
    for (const s of grounding.sentences) if (s && (s.supported === false || s.grounded === false)) out.push(s.text);
  }
  return out.filter((t) => typeof t === "string" && t.trim().length > 3);
}

// Walk the rendered answer's text: [n] becomes a button opening passage n; unsupported sentences are marked.
function decorate(root, list, panel, unsupported) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const nodes = [];
  while (walker.nextNode()) if (!walker.currentNode.parentElement.closest("pre,code")) nodes.push(walker.currentNode);
  for (const node of nodes) {
    const text = node.nodeValue;
    if (!/\[\d+\]/.test(text)) continue;
    const frag = document.createDocumentFragment();
    let last = 0;
    for (const m of text.matchAll(/\[(\d+)\]/g)) {
      const c = list.find((x) => x.n === Number(m[1]));
      if (!c) continue;
      frag.append(text.slice(last, m.index));
      const btn = h("button", { type: "button", class: "cite", "aria-label": `Source ${c.n}: ${sourceTitle(c)}` }, `[${c.n}]`);
      btn.addEventListener("click", () => openPassage(panel, c));
      frag.append(btn);
      last = m.index + m[0].length;
    }
    frag.append(text.slice(last));
    node.replaceWith(frag);
  }
  for (const sentence of unsupported) {
    const w = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    while (w.nextNode()) {
      const node = w.currentNode;
      const at = node.nodeValue.indexOf(sentence.trim());
      if (at < 0) continue;
      const rest = node.splitText(at);
      rest.splitText(sentence.trim().length);
      const mark = h("mark", { class: "unsupported", title: "No cited source supports this sentence" }, rest.nodeValue);
      rest.replaceWith(mark);
      break;
    }
  }
  if (unsupported.length) root.append(h("p", { class: "note unsupported-note" }, `${unsupported.length} sentence${unsupported.length > 1 ? "s are" : " is"} not supported by a cited source (marked).`));
  for (const pre of root.querySelectorAll("pre")) enhanceCode(pre);
}

// A code block: its language (from the sanitised language-* class) and a copy button above it.
function enhanceCode(pre) {
  const code = pre.querySelector("code");
  const lang = code ? [...code.classList].find((c) => c.startsWith("language-")) : null;
  const copy = h("button", { type: "button", class: "small secondary copy-code" }, "Copy code");
  copy.addEventListener("click", () => copyText(pre.textContent, copy, pre));
  const box = h("div", { class: "code-block" });
  pre.replaceWith(box);
  box.append(h("div", { class: "code-tools" }, lang ? h("span", { class: "code-lang" }, lang.slice(9)) : "", copy), pre);
}

// Copies with the async Clipboard API; where it is refused (no permission, an insecure origin) the
// text is copied through a selection instead, and if that fails too the block is left selected.
async function copyText(text, btn, node = null) {
  const label = btn.textContent;
  let ok = false;
  try { await navigator.clipboard.writeText(text); ok = true; } catch { ok = copyBySelection(text, node); }
  btn.dataset.state = ok ? "copied" : "failed";
  btn.textContent = ok ? "Copied" : "Press Ctrl+C to copy";
  setTimeout(() => { btn.textContent = label; }, 1500);
}

function copyBySelection(text, node) {
  const scratch = h("textarea", { class: "sr-only", readonly: true, "aria-hidden": "true", tabindex: "-1" });
  scratch.value = text;
  document.body.append(scratch);
  scratch.select();
  let ok = false;
  try { ok = document.execCommand("copy"); } catch { ok = false; }
  scratch.remove();
  if (!ok && node) {
    const range = document.createRange();
    range.selectNodeContents(node);
    window.getSelection().removeAllRanges();
    window.getSelection().addRange(range);
  }
  return ok;
}

// Sanitised HTML from the server into a node: parsed inert (a template), then moved into the page.
function htmlNode(html) {
  const t = document.createElement("template");
  t.innerHTML = html;
  return t.content;
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
  const select = h("select", { name: "model", id: "model", class: "model-picker" }, h("option", { value: "auto" }, "auto (chosen for you)"),
    models.map((m) => h("option", { value: m.id, title: `${m.provider} · ${m.region}` }, `${m.name || m.id}${m.kind === "extractive" ? " (quotes your sources)" : ""}`)));
  const panel = h("aside", { class: "passage-panel", id: "passage-panel", "aria-label": "Cited passage", hidden: true });
  const thread = h("ol", { class: "messages", id: "messages", "aria-live": "polite" });
  let current = chatId;
  let messages = []; // the chat as stored: [{id, role, content, citations, grounding, feedback, ...}]
  let busy = null; // the AbortController of the answer streaming now
  let queued = null; // {chat, id} of the answer the server is generating now (Stop asks the server)

  // One assistant answer: rendered Markdown, numbered citations, its tools.
  async function fillAnswer(li, m, html) {
    const { text, list } = numberCitations(m.content, m.citations);
    const body = h("div", { class: "answer md" });
    body.append(htmlNode(html ?? (await renderMarkdown([text]))[0]));
    decorate(body, list, panel, unsupportedSentences(m.grounding, m.content));
    const up = h("button", { type: "button", class: "small secondary thumb", "aria-pressed": String((m.feedback || {}).rating === "up"), "aria-label": "Good answer" }, "Good");
    const down = h("button", { type: "button", class: "small secondary thumb", "aria-pressed": String((m.feedback || {}).rating === "down"), "aria-label": "Bad answer" }, "Bad");
    const rateStatus = h("span", { class: "meta", role: "status" });
    const setRating = async (rating) => {
      if (!m.id || !current) return;
      const next = (m.feedback || {}).rating === rating ? null : rating;
      try {
        const saved = await rate(current, m.id, next);
        m.feedback = saved.feedback;
        up.setAttribute("aria-pressed", String(next === "up"));
        down.setAttribute("aria-pressed", String(next === "down"));
        rateStatus.textContent = next ? "Thanks: feedback saved." : "Feedback removed.";
      } catch (err) { rateStatus.replaceChildren(problemBox(err)); }
    };
    up.addEventListener("click", () => setRating("up"));
    down.addEventListener("click", () => setRating("down"));
    const copy = h("button", { type: "button", class: "small secondary copy-answer" }, "Copy");
    copy.addEventListener("click", () => copyText(m.content.replace(/\[\d+\]/g, ""), copy));
    const isLast = messages[messages.length - 1] === m;
    const regen = isLast && current ? h("button", { type: "button", class: "small secondary", id: "regenerate" }, "Regenerate") : "";
    if (regen) regen.addEventListener("click", () => send({ regenerate: true }));
    li.replaceChildren(originLabel(m), body,
      list.length ? h("div", { class: "citations" }, h("h3", {}, "Sources"), list.map((c) => citationView(c, panel))) : "",
      h("div", { class: "msg-tools" }, copy, up, down, regen, rateStatus),
      m.stopped ? h("p", { class: "note stopped-mark" }, "Stopped: this answer was cut off when Stop was pressed.") : "",
      routingView(m.routing),
      h("p", { class: "meta" }, [m.model, m.region].filter(Boolean).join(" · "),
        groundingText(m)));
  }

  function questionView(li, m) {
    const edit = h("button", { type: "button", class: "small secondary edit-question" }, "Edit");
    edit.addEventListener("click", () => {
      const box = h("textarea", { rows: "3", "aria-label": "Edit your question" });
      box.value = m.content;
      const save = h("button", { type: "button", class: "small" }, "Save and resend");
      const cancel = h("button", { type: "button", class: "small secondary" }, "Cancel");
      cancel.addEventListener("click", () => questionView(li, m));
      save.addEventListener("click", () => { const v = box.value.trim(); if (v) send({ edit: { messageId: m.id, content: v } }); });
      li.replaceChildren(box, h("div", { class: "msg-tools" }, save, cancel));
      box.focus();
    });
    li.replaceChildren(h("div", { class: "question" }, m.content), m.id && current && !busy ? h("div", { class: "msg-tools" }, edit) : "");
  }

  async function drawThread() {
    const answers = messages.filter((m) => m.role === "assistant");
    const html = await renderMarkdown(answers.map((m) => numberCitations(m.content, m.citations).text));
    const items = [];
    for (const m of messages) {
      if (m.role === "system") continue;
      const li = h("li", { class: m.role, "data-id": m.id || "" });
      if (m.role === "assistant") await fillAnswer(li, m, html[answers.indexOf(m)]);
      else questionView(li, m);
      items.push(li);
    }
    thread.replaceChildren(...items);
    emptyNote.hidden = items.length > 0;
    optionsBox.hidden = Boolean(current); // a preset and the answer mode are chosen when a chat starts
  }
  const showLatest = () => { if (thread.lastElementChild) thread.lastElementChild.scrollIntoView({ block: "nearest" }); };

  let resumeId = null; // an answer still being generated when the page was (re)loaded
  if (chatId) {
    const chat = await getChat(chatId);
    messages = chat.messages || [];
    resumeId = chat.answering ? chat.answering.id : null;
  }

  const prompt = h("textarea", { name: "prompt", id: "prompt", rows: "2", required: true,
    placeholder: "Ask about your workspace's data and documents (Ctrl+Enter sends)" });
  const stop = h("button", { type: "button", id: "stop", class: "secondary", hidden: true }, "Stop");
  const status = h("div", { class: "form-status", role: "status", id: "chat-status" });
  stop.addEventListener("click", async () => {
    if (queued) {
      status.replaceChildren(h("p", { class: "note", id: "stopped" }, "Stopped. The partial answer is kept, marked as stopped."));
      try { await stopAnswer(queued.chat, queued.id); } catch (err) { status.replaceChildren(problemBox(err)); }
    } else if (busy) busy.abort();
  });

  // After Stop the server stops the model and stores the partial answer when it notices the reader
  // left (at the model's next piece): read the chat until that answer is there (a few seconds at most).
  async function storedAfterStop(chat, messageId) {
    if (!chat) return null;
    for (let i = 0; i < 40; i++) {
      try {
        const stored = (await getChat(chat)).messages || [];
        if (!messageId || stored.some((m) => m.id === messageId)) return stored;
      } catch (err) { if (err.status !== 404) return null; }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    return null;
  }

  // How many messages of the thread stay when asking: all, up to the last question (regenerate), or
  // those before the edited question.
  function kept({ regenerate, edit }) {
    if (edit) return messages.findIndex((m) => m.id === edit.messageId);
    return regenerate ? messages.map((m) => m.role).lastIndexOf("user") + 1 : messages.length;
  }

  // Ask (a new question, regenerate, or an edited question), streaming the answer into the thread.
  async function send({ text = "", regenerate = false, edit = null, resume = null } = {}) {
    if (busy) return;
    status.replaceChildren();
    const keep = kept({ regenerate, edit });
    const before = messages;
    messages = messages.slice(0, keep);
    if (edit) messages.push({ role: "user", content: edit.content });
    if (text) messages.push({ role: "user", content: text });
    await drawThread();
    const answerLi = h("li", { class: "assistant streaming", "aria-busy": "true" });
    const live = h("div", { class: "answer streaming-text" });
    answerLi.append(live);
    thread.append(answerLi);
    showLatest();
    busy = new AbortController();
    let started = null; // {chat, id} of the answer once its first event arrived
    if (resume) queued = { chat: current, id: resume };
    stop.hidden = false;
    sendBtn.disabled = true;
    status.replaceChildren(h("span", { class: "loading" }, "Answering…"));
    const onEvent = (ev) => {
      if (ev.type === "message_start") started = { chat: ev.reply.chat_id, id: ev.reply.id };
      if (ev.type === "content_delta") live.textContent = ev.reply.content;
    };
    const onQueued = (made) => {
      queued = { chat: made.chat_id, id: made.id };
      started = queued;
      if (!current) { current = made.chat_id; window.history.replaceState(null, "", `/chat/${encodeURIComponent(current)}`); }
    };
    try {
      const reply = resume ? await follow(current, resume, onEvent)
        : await ask({ model: select.value, messages: messages.map(({ role, content }) => ({ role, content })), chatId: current, regenerate, edit, signal: busy.signal, options: chatOptions() }, onEvent, onQueued);
      const m = { id: reply.id, role: "assistant", content: reply.content, citations: reply.citations, grounding: reply.grounding, routing: reply.routing, model: reply.model, region: reply.region, origin: reply.origin };
      messages.push(m);
      if (!current && reply.chat_id) { current = reply.chat_id; window.history.replaceState(null, "", `/chat/${encodeURIComponent(current)}`); }
      if (current) messages = (await getChat(current)).messages || messages; // ids of the stored question
      if (!reply.stopped) status.replaceChildren();
      announce("Answer complete.");
    } catch (err) {
      if (err.name === "AbortError") {
        status.replaceChildren(h("p", { class: "note", id: "stopped" }, "Stopped. The partial answer is kept, marked as stopped."));
        if (started && started.chat && !current) { current = started.chat; window.history.replaceState(null, "", `/chat/${encodeURIComponent(current)}`); }
        messages = (await storedAfterStop(current, started && started.id)) || before;
      } else {
        messages = queued && current ? ((await storedAfterStop(current, null)) || before) : before; // the question stays
        status.replaceChildren(problemBox(err));
      }
    } finally {
      busy = null;
      queued = null;
      stop.hidden = true;
      sendBtn.disabled = false;
    }
    await drawThread();
    showLatest();
    drawList();
  }

  const sendBtn = h("button", { type: "submit", id: "send" }, "Send");
  // The model picker, the answer options of a new chat (preset, answer mode: chat_options.js) and a note
  // on which models are offered, in one compact bar under the message box.
  const modelsHelp = h("details", { class: "models-help", id: "models-help" }, h("summary", {}, "About models"),
    h("div", { class: "popover" },
      h("p", {}, "Only models allowed for this workspace's residency and your role are offered; each answer's routing note names the models it excluded and why."),
      isAdmin(me) ? h("p", {}, h("a", { href: "/models" }, "Models page")) : ""));
  const optionsBox = h("div", { class: "composer-options", id: "composer-options" });
  const chatOptions = mountChatOptions(optionsBox, me);
  const composer = form(async (data) => {
    const text = String(data.get("prompt") || "").trim();
    if (!text) return;
    prompt.value = "";
    await send({ text });
  }, h("label", { for: "prompt", class: "sr-only" }, "Message"), prompt,
  h("div", { class: "composer-bar" },
    h("span", { class: "composer-picks" }, h("label", { for: "model", class: "sr-only" }, "Model"), select,
      optionsBox, modelsHelp),
    h("span", { class: "row-actions composer-actions" }, attachControl(me), stop, sendBtn)), status);
  composer.classList.add("composer");
  composer.id = "composer";
  prompt.addEventListener("keydown", (ev) => { if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) composer.requestSubmit(); });

  const emptyNote = empty("No messages yet: ask about your workspace's data and documents.");
  const list = h("div", { id: "chat-list-box", "aria-live": "polite" }, loading());

  // The conversation list, or only the conversations a search matches (the server searches titles
  // and messages); clearing the search brings the whole list back.
  let query = "";
  let drawn = 0; // the latest drawList call: an earlier, slower answer is not drawn over it
  const searchBox = h("input", { type: "search", name: "q", id: "chat-search", placeholder: "Words in a title or message" });
  const clearBtn = h("button", { type: "button", class: "small secondary", id: "clear-search", hidden: true }, "Clear");
  const setQuery = (q) => { query = q; clearBtn.hidden = !q; return drawList(); };
  clearBtn.addEventListener("click", () => { searchBox.value = ""; setQuery(""); searchBox.focus(); });
  searchBox.addEventListener("input", () => { if (!searchBox.value.trim() && query) setQuery(""); });
  const searchForm = form(async (data) => setQuery(String(data.get("q") || "").trim()),
    field("Search conversations", searchBox), h("button", { type: "submit", class: "small", id: "search-chats" }, "Search"), clearBtn);

  function chatItem(c) {
    const link = h("a", { href: `/chat/${encodeURIComponent(c.id)}`, "aria-current": c.id === current ? "page" : null }, c.title || "Untitled");
    const li = h("li", {}, link);
    const rename = h("button", { type: "button", class: "small secondary", "aria-label": `Rename ${c.title}` }, "Rename");
    rename.addEventListener("click", () => {
      const input = h("input", { value: c.title, "aria-label": "New title", maxlength: "120" });
      const save = action("Save", async () => { const s = await renameChat(c.id, input.value); c.title = s.title; li.replaceWith(chatItem(c)); }, { class: "small" });
      li.replaceChildren(input, save);
      input.focus();
    });
    const del = h("button", { type: "button", class: "small secondary", "aria-label": `Delete ${c.title}` }, "Delete");
    del.addEventListener("click", async () => {
      if (!confirm("Delete this conversation?")) return;
      await deleteChat(c.id);
      if (c.id === current) await navigate("/chat"); else drawList();
    });
    li.append(h("span", { class: "chat-tools" }, rename, del));
    if (c.match) li.append(h("div", { class: "meta" }, c.match === "message" ? c.snippet : "title matches"));
    return li;
  }
  async function drawList() {
    const mine = ++drawn;
    const q = query;
    try {
      const chats = ((q ? await searchChats(q) : await listChats()).items) || [];
      if (mine !== drawn) return;
      if (q) {
        list.replaceChildren(chats.length ? h("ul", { class: "chat-list search-hits" }, chats.map(chatItem))
          : h("p", { class: "empty", id: "no-match" }, `No conversation matches "${q}".`));
      } else list.replaceChildren(chats.length ? h("ul", { class: "chat-list" }, chats.map(chatItem)) : empty("No conversations yet."));
    } catch (err) { if (mine === drawn) list.replaceChildren(problemBox(err)); }
  }
  await drawThread();
  if (resumeId) send({ resume: resumeId }); // a reload mid-answer: follow it from its first event
  // No generative model offered here: say so, and how to connect one (Admins: the Models page).
  const noModel = models.some((m) => m.kind === "generative") ? "" : h("p", { class: "note", id: "no-generative-model", role: "note" },
    "No generative model is connected: answers quote your sources instead of being written by a model. ",
    isAdmin(me) ? h("a", { href: "/models" }, "Connect a model") : "Ask an Admin to connect one on the Models page",
    " (any OpenAI-compatible endpoint, or a Bedrock model in this workspace's region).");

  // The conversation list: a sidebar on a wide screen, a drawer on a phone (closed at first; its
  // button, Escape, or choosing a conversation closes it).
  const toggle = h("button", { type: "button", class: "small secondary drawer-toggle", id: "chat-drawer-toggle",
    "aria-expanded": "false", "aria-controls": "chat-drawer" }, "Conversations");
  const closeDrawer = h("button", { type: "button", class: "small secondary drawer-close", id: "chat-drawer-close" }, "Close");
  const drawer = h("div", { class: "chat-side", id: "chat-drawer" }, closeDrawer,
    section("Conversations", h("a", { href: "/chat", class: "button secondary" }, "New conversation"), searchForm, list),
    section("Models offered here", h("ul", { id: "models", class: "models-list" }, models.map((m) => h("li", {},
      h("strong", {}, m.name || m.id), ` (${m.provider}, ${m.region})`, m.available_because ? h("div", { class: "meta" }, m.available_because) : "")))));
  const setDrawer = (open) => {
    drawer.classList.toggle("open", open);
    toggle.setAttribute("aria-expanded", String(open));
    if (open) closeDrawer.focus();
    else if (drawer.contains(document.activeElement)) toggle.focus();
  };
  toggle.addEventListener("click", () => setDrawer(!drawer.classList.contains("open")));
  closeDrawer.addEventListener("click", () => setDrawer(false));
  drawer.addEventListener("click", (ev) => { if (ev.target.closest("a[href^='/chat']")) setDrawer(false); });
  const onKey = (ev) => {
    if (!drawer.isConnected) { document.removeEventListener("keydown", onKey); return; }
    if (ev.key === "Escape" && drawer.classList.contains("open")) setDrawer(false);
  };
  document.addEventListener("keydown", onKey);

  const conversation = section("Conversation", emptyNote, thread, composer);
  conversation.querySelector("h2").classList.add("sr-only");
  view.replaceChildren(h("div", { class: "chat-head" }, h("h1", {}, "Chat"), toggle), noModel,
    h("div", { class: "chat" }, drawer, h("div", { class: "chat-main" }, conversation, panel)));
  showLatest();
  await drawList();
}

// Attach documents from the chat box: they go to the workspace's knowledge (Admins add sources).
function attachControl(me) {
  if (!isAdmin(me)) return "";
  const input = h("input", { type: "file", multiple: true, accept: ACCEPT, id: "chat-attach", class: "sr-only" });
  const uploads = h("ul", { class: "uploads", id: "chat-uploads", "aria-live": "polite" });
  input.addEventListener("change", () => {
    const files = [...input.files];
    input.value = "";
    uploadFiles(files, uploadConnector, uploads).catch((err) => uploads.append(h("li", { class: "error" }, err.message)));
  });
  return h("span", { class: "attach" }, h("label", { for: "chat-attach", class: "button secondary" }, "Attach documents"), input, uploads);
}
