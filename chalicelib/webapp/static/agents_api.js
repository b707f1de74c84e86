// The agents API's documented contract (definitions, runs, SSE run events, cancel) in one module.
import { platform, events, idempotencyKey } from "./api.js";

const a = (id) => `/v1/agents/${encodeURIComponent(id)}`;
// The tools an agent may be given, from the platform's tool catalogue: [{name, title, summary, ...}].
export const listTools = () => platform("/v1/agents/tools").then((body) => body.tools || []);
export const listAgents = () => platform("/v1/agents", { query: { limit: 100 } });
export const getAgent = (id) => platform(a(id));
export const saveAgent = (id, body) => (id ? platform(a(id), { method: "PATCH", body }) : platform("/v1/agents", { method: "POST", body }));
export const deleteRun = (id, runId) => platform(`${a(id)}/runs/${encodeURIComponent(runId)}`, { method: "DELETE" });
export const deleteAgent = (id) => platform(a(id), { method: "DELETE" });
export const startRun = (id, input, agentVersion) => platform(`${a(id)}/runs`, { method: "POST", body: agentVersion ? { input, agent_version: agentVersion } : { input }, headers: { "Idempotency-Key": idempotencyKey() } });
export const listRuns = (id, status = "") => platform(`${a(id)}/runs`, { query: { limit: 25, status } });
export const getRun = (id, runId) => platform(`${a(id)}/runs/${encodeURIComponent(runId)}`);
export const cancelRun = (id, runId) => platform(`${a(id)}/runs/${encodeURIComponent(runId)}/cancel`, { method: "POST", body: {} });

// Run events as server-sent events, resumed after lastId (Last-Event-ID); the API holds the request
// up to `wait` seconds until a new event exists and answers the events as one body.
export async function* runEvents(id, runId, lastId = "") {
  const headers = lastId ? { "Last-Event-ID": lastId } : {};
  const resp = await platform(`${a(id)}/runs/${encodeURIComponent(runId)}/events`, { stream: true, headers, query: { wait: 10 } });
  for await (const ev of events(resp)) yield ev;
}
