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

// Streams one answer. A new chat sends the whole conversation; a continued chat only the new
// message (the server puts the stored history before it); ``regenerate`` answers the last question
// again; ``edit`` replaces one question. onEvent sees each event in sequence order, as the model writes
// (content_delta: its text so far; the citations event brings the verified text); ``signal`` stops it,
// and the server then stops the model and keeps the partial answer, marked stopped.
export async function ask({ model, messages, chatId, regenerate = false, edit = null, signal }, onEvent) {
  let path = chatId ? `${chatPath(chatId)}/messages` : "/v1/chats";
  let body = { model, stream: true, messages: chatId ? messages.slice(-1) : messages };
  if (regenerate) { path = `${chatPath(chatId)}/regenerate`; body = { model, stream: true }; }
  if (edit) { path = `${chatPath(chatId)}/messages/${encodeURIComponent(edit.messageId)}/edit`; body = { model, stream: true, content: edit.content }; }
  const resp = await platform(path, { method: "POST", body, stream: true, headers: { "Idempotency-Key": idempotencyKey() }, signal });
  const reply = { content: "", citations: [], routing: null, chat_id: chatId || null, usage: null, grounding: null };
  const type = resp.headers.get("Content-Type") || "";
  if (!type.includes("text/event-stream")) {
    const whole = await resp.json();
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
    if (ev.event === "message_start") Object.assign(reply, { id: data.id, chat_id: data.chat_id || reply.chat_id, routing: data.routing, model: data.model, provider: data.provider, region: data.region, kind: data.kind });
    else if (ev.event === "content_delta") reply.content += data.text ?? "";
    else if (ev.event === "citations") Object.assign(reply, typeof data.content === "string" ? { content: data.content } : {}, { citations: data.citations || [], grounding: data.grounding || null, notice: data.notice || null, unverified_answer: data.unverified_answer || null });
    else if (ev.event === "message_stop") reply.usage = data.usage || null;
    else if (ev.event === "error") throw Object.assign(new Error(data.detail || "The answer failed."), { problem: data });
    onEvent({ type: ev.event, data, reply });
  }
  return reply;
}
