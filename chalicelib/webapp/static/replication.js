// The disaster-recovery copy of a workspace as the workspace read reports it: `replication_lag_seconds`
// and `last_replicated_at` (absent or null while nothing is replicated). The RPO of cross-region DR is
// 15 minutes, so a larger lag is flagged.
import { h, badge, when } from "./dom.js";

export const RPO_SECONDS = 15 * 60;

export function lagText(seconds) {
  if (seconds < 90) return `${Math.round(seconds)} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

export function drStatus(ws) {
  const lag = ws.replication_lag_seconds;
  if (lag === undefined || lag === null || !ws.last_replicated_at) {
    return h("span", { id: "dr-lag", "data-replicated": "false" }, badge("not replicated"),
      ws.replication === "cross-region-dr" ? " yet: the first copy to the secondary region has not been made." : "");
  }
  const late = lag > RPO_SECONDS;
  return h("span", { id: "dr-lag", "data-replicated": "true" }, badge(late ? "behind the RPO" : "within the RPO", late ? "bad" : "good"),
    ` lag ${lagText(lag)} · last copy ${when(ws.last_replicated_at)}`);
}
