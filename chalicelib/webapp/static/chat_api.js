// The chat API (GET /v1/models, POST /v1/chats and /v1/chats/{id}/messages with server-sent events,
// chats list/read/delete) in one module, so the page does not depend on the wire details.
import { platform, events, idempotencyKey } from "./api.js";

export const listModels = () => platform("/v1/models");
export const listChats = (after = "") => platform("/v1/chats", { query: { limit: 50, after } });
export const getChat = (id) => platform(`/v1/chats/${encodeURIComponent(id)}`);
export const deleteChat = (id) => platform(`/v1/chats/${encodeURIComponent(id)}`, { method: "DELETE" });

// Streams one answer. A new chat sends the whole conversation; a continued chat only the new
// message (the server puts the stored history before it). onEvent sees each event in sequence order.
export async function ask({ model, messages, chatId }, onEvent) {
  const path = chatId ? `/v1/chats/${encodeURIComponent(chatId)}/messages` : "/v1/chats";
  const body = { model, stream: true, messages: chatId ? messages.slice(-1) : messages };
  const resp = await platform(path, { method: "POST", body, stream: true, headers: { "Idempotency-Key": idempotencyKey() } });
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
    else if (ev.event === "citations") Object.assign(reply, { citations: data.citations || [], grounding: data.grounding || null, notice: data.notice || null, unverified_answer: data.unverified_answer || null });
    else if (ev.event === "message_stop") reply.usage = data.usage || null;
    else if (ev.event === "error") throw Object.assign(new Error(data.detail || "The answer failed."), { problem: data });
    onEvent({ type: ev.event, data, reply });
  }
  return reply;
}
