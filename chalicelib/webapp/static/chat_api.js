// The chat API (GET /v1/models, POST /v1/chats and /v1/chats/{id}/messages with server-sent events,
// regenerate, edit and resend, chats list/search/read/rename/delete, feedback per answer) in one module,
// so the page does not depend on the wire details; plus the app's Markdown rendering (/api/render).
import { platform, events, idempotencyKey, raw } from "./api.js";

const chatPath = (id) => `/v1/chats/${encodeURIComponent(id)}`;
export const listModels = () => platform("/v1/models");
export const listChats = (after = "") => platform("/v1/chats", { query: { limit: 50, after } });
export const searchChats = (q) => platform("/v1/chats", { query: { q, limit: 20 } });
export const getChat = (id) => platform(chatPath(id));
export const deleteChat = (id) => platform(chatPath(id), { method: "DELETE" });
export const renameChat = (id, title) => platform(chatPath(id), { method: "PATCH", body: { title } });
export const rate = (id, messageId, rating) => platform(`${chatPath(id)}/messages/${encodeURIComponent(messageId)}/feedback`, { method: "PUT", body: { rating } });

// Markdown answers as sanitised HTML, rendered by the app's server (markdown-it-py + nh3).
export async function renderMarkdown(texts) {
  if (!texts.length) return [];
  const resp = await raw("/api/render", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ items: texts }) });
  return (await resp.json()).html;
}

// Applies one event of an answer to ``reply`` (the same events whether read live, resumed or replayed).
function apply(reply, ev) {
  const data = ev.json || {};
  if (ev.event === "message_start") Object.assign(reply, { id: data.id, chat_id: data.chat_id || reply.chat_id, routing: data.routing, model: data.model, provider: data.provider, region: data.region, kind: data.kind });
  else if (ev.event === "content_delta") reply.content += data.text ?? "";
  else if (ev.event === "citations") Object.assign(reply, typeof data.content === "string" ? { content: data.content } : {}, { citations: data.citations || [], grounding: data.grounding || null, notice: data.notice || null, unverified_answer: data.unverified_answer || null, origin: data.origin || null });
  else if (ev.event === "message_stop") Object.assign(reply, { usage: data.usage || null, stopped: data.stop_reason === "stopped" });
  else if (ev.event === "error") throw Object.assign(new Error(data.detail || "The answer failed."), { problem: data });
}

function emptyReply(chatId) {
  return { content: "", citations: [], routing: null, chat_id: chatId || null, usage: null, grounding: null };
}

// Follows an answer being generated on the server (GET .../answers/{id}/events), EventSource-style:
// each response ends after a short while (so proxies that buffer whole bodies still deliver progress),
// and the next one asks for the events after the last one seen (Last-Event-ID), until message_stop or
// error. A reload calls this again with the chat's ``answering`` and resumes from the first event.
export async function follow(chatId, messageId, onEvent, { signal } = {}) {
  const reply = emptyReply(chatId);
  let last = 0;
  let retry = 250;
  for (;;) {
    const resp = await platform(`${chatPath(chatId)}/answers/${encodeURIComponent(messageId)}/events`,
      { stream: true, query: { wait: 10 }, headers: last ? { "Last-Event-ID": String(last) } : {}, signal });
    for await (const ev of events(resp)) {
      if (typeof ev.retry === "number") retry = ev.retry;
      const data = ev.json || {};
      if (typeof data.sequence !== "number" || data.sequence <= last) continue;
      last = data.sequence;
      apply(reply, ev);
      onEvent({ type: ev.event, data, reply });
      if (ev.event === "message_stop") return reply;
    }
    await new Promise((resolve) => setTimeout(resolve, retry));
  }
}

// Asks the server to stop an answer being generated; it keeps what was written, marked stopped.
export const stopAnswer = (chatId, messageId) => platform(`${chatPath(chatId)}/answers/${encodeURIComponent(messageId)}/stop`, { method: "POST", body: {} });

// One answer. A new chat sends the whole conversation; a continued chat only the new message (the
// server puts the stored history before it): the server records the question and, asked with
// ``Prefer: respond-async``, answers 202 at once and generates the answer apart from this request;
// ``onQueued`` hears its ids and the answer is followed as above (a server that answers the event
// stream or the whole reply itself is read as it is). ``regenerate`` answers the last question again and
// ``edit`` replaces one question: these stream in their own response. ``signal`` aborts the request.
export async function ask({ model, messages, chatId, regenerate = false, edit = null, signal, options = {} }, onEvent, onQueued = () => {}) {
  let path = chatId ? `${chatPath(chatId)}/messages` : "/v1/chats";
  let body = { model, stream: true, messages: chatId ? messages.slice(-1) : messages, ...(chatId ? {} : options) };
  const headers = { "Idempotency-Key": idempotencyKey() };
  if (!regenerate && !edit) headers.Prefer = "respond-async";
  if (regenerate) { path = `${chatPath(chatId)}/regenerate`; body = { model, stream: true }; }
  if (edit) { path = `${chatPath(chatId)}/messages/${encodeURIComponent(edit.messageId)}/edit`; body = { model, stream: true, content: edit.content }; }
  const resp = await platform(path, { method: "POST", body, stream: true, headers, signal });
  const reply = emptyReply(chatId);
  const type = resp.headers.get("Content-Type") || "";
  if (!type.includes("text/event-stream")) {
    const whole = await resp.json();
    if (resp.status === 202 && whole.events) {
      onQueued(whole);
      return follow(whole.chat_id, whole.id, onEvent);
    }
    Object.assign(reply, whole, { content: whole.message ? whole.message.content : "" });
    onEvent({ type: "message_stop", reply });
    return reply;
  }
  let last = 0;
  for await (const ev of events(resp)) {
    const data = ev.json || {};
    if (typeof data.sequence === "number") {
      if (data.sequence <= last) continue; // a replayed event
      last = data.sequence;
    }
    if (!ev.event || ev.event === "message") continue; // a retry line alone
    apply(reply, ev);
    onEvent({ type: ev.event, data, reply });
  }
  return reply;
}
