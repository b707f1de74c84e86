// The chat API's documented contract (GET /v1/models, POST /v1/chats with SSE, chats list/read/delete),
// kept in one module so the pages stay the same when the API's details settle.
import { platform, events, idempotencyKey } from "./api.js";

export const listModels = async () => (await platform("/v1/models")).models || [];
export const listChats = (after = "") => platform("/v1/chats", { query: { limit: 50, after } });
export const getChat = (id) => platform(`/v1/chats/${encodeURIComponent(id)}`);
export const deleteChat = (id) => platform(`/v1/chats/${encodeURIComponent(id)}`, { method: "DELETE" });

// Streams one answer: onEvent receives {type, ...} for message_start, content_delta, citations,
// message_stop (in sequence order). Returns the assembled reply.
export async function ask({ model, messages, chatId }, onEvent) {
  const body = { model, messages, stream: true };
  if (chatId) body.chat_id = chatId;
  const resp = await platform("/v1/chats", { method: "POST", body, stream: true, headers: { "Idempotency-Key": idempotencyKey() } });
  const reply = { content: "", citations: [], routing: null, chat_id: chatId || null, usage: null };
  const type = resp.headers.get("Content-Type") || "";
  if (!type.includes("text/event-stream")) {
    const whole = await resp.json();
    const out = { ...reply, ...whole, content: whole.message ? whole.message.content : "" };
    onEvent({ type: "message_stop", ...out });
    return out;
  }
  for await (const ev of events(resp)) {
    const data = ev.json || {};
    const kind = data.type || ev.event;
    if (kind === "message_start") Object.assign(reply, { chat_id: data.chat_id || reply.chat_id, routing: data.routing || reply.routing, model: data.model, provider: data.provider, region: data.region });
    else if (kind === "content_delta") reply.content += data.delta ?? data.text ?? "";
    else if (kind === "citations") reply.citations = data.citations || [];
    else if (kind === "message_stop") Object.assign(reply, { usage: data.usage || null, routing: data.routing || reply.routing, grounding: data.grounding });
    else if (kind === "error") throw Object.assign(new Error(data.detail || "The answer failed."), { problem: data });
    onEvent({ type: kind, ...data, reply });
  }
  return reply;
}
