// The disaster-recovery copy of a workspace as the workspace read reports it (cross-region-dr only):
// `replication_secondary_region`, `last_replicated_at` (the checkpoint of the last complete copy pass,
// null before the first) and `replication_lag_seconds` (since that checkpoint, or since DR was turned
// on). Without cross-region DR all three are null (or absent on an older deployment): "not replicated".
// The RPO is 15 minutes, so a larger lag is flagged.
import { h, badge, when } from "./dom.js";

export const RPO_SECONDS = 15 * 60;

export function lagText(seconds) {
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

export function drStatus(ws) {
  const lag = ws.replication_lag_seconds;
  const to = ws.replication_secondary_region ? ` to ${ws.replication_secondary_region}` : "";
  if (lag === undefined || lag === null) {
    return h("span", { id: "dr-lag", "data-replicated": "false" }, badge("not replicated"), " no cross-region copy");
  }
  const late = lag > RPO_SECONDS;
  if (!ws.last_replicated_at) {
    return h("span", { id: "dr-lag", "data-replicated": "false" }, badge(late ? "behind the RPO" : "not replicated yet", late ? "bad" : "warn"),
      ` the first copy${to} is pending (cross-region DR on for ${lagText(lag)})`);
  }
  return h("span", { id: "dr-lag", "data-replicated": "true" }, badge(late ? "behind the RPO" : "within the RPO", late ? "bad" : "good"),
    ` lag ${lagText(lag)}${to} · last copy ${when(ws.last_replicated_at)}`);
}
