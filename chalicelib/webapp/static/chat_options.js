// The choices a new chat is started with, rendered into the composer's `.composer-options`: a preset
// picker (GET /v1/presets: the caller's and the workspace's; shown when there is one) and the answer mode
// (shown only where the workspace allows general answers: settings.answer_mode knowledge_first). The
// page hides the box in an open chat: both are chosen when a chat starts. Also how an answer's origin
// and grounding are labelled: a general answer says it is not from the workspace's sources and shows no
// grounding figure; quotes that miss the question's key terms are not shown as a percentage backed.
import { platform } from "./api.js";
import { h } from "./dom.js";

export const GENERAL_LABEL = "General answer - not from your workspace's sources";

// Fills `box`; returns a function giving the fields of a NEW chat ({preset_id?, mode?}).
export function mountChatOptions(box, me) {
  if (!box) return () => ({});
  const preset = h("select", { name: "preset", id: "preset" }, h("option", { value: "" }, "No preset"));
  const general = h("input", { type: "checkbox", name: "general_allowed", id: "general-allowed" });
  const mode = h("label", { id: "mode-choice", hidden: true }, general, " New chat: allow general answers when your sources do not answer");
  const presetChoice = h("label", { id: "preset-choice", title: "Applies when a new chat starts", hidden: true }, "Preset for a new chat ", preset);
  box.replaceChildren(presetChoice, mode);
  platform("/v1/presets").then(({ items }) => {
    presetChoice.hidden = !(items || []).length; // no picker with nothing to pick
    preset.append(...(items || []).map((p) => h("option", { value: p.id }, p.scope === "workspace" ? `${p.name} (workspace)` : p.name)));
  }).catch(() => {});
  platform(`/v1/workspaces/${encodeURIComponent(me.workspace_id)}`).then((ws) => {
    box.dataset.answerMode = (ws.settings || {}).answer_mode || "knowledge_only"; // read: the choice is settled
    mode.hidden = box.dataset.answerMode !== "knowledge_first";
  }).catch(() => {});
  return () => ({ ...(preset.value ? { preset_id: preset.value } : {}), ...(!mode.hidden && general.checked ? { mode: "general_allowed" } : {}) });
}

// The visible label of a general answer ("" for an answer from the sources).
export const originLabel = (m) => (m && m.origin === "general" ? h("p", { class: "note general-answer", role: "note" }, GENERAL_LABEL) : "");

// The grounding figure beside an answer: none for a general answer; no percentage when the verified
// quotes miss some of the question's key terms (they may be true and still not answer it).
export function groundingText(m) {
  const g = m && m.grounding;
  if (!g || m.origin === "general" || typeof g.ratio !== "number") return "";
  if (g.answers_question === false) {
    return ` · quotes verified - they do not mention ${(g.question_terms_not_quoted || []).join(", ")}, so they may not answer your question`;
  }
  return ` · ${Math.round(g.ratio * 100)}% of sentences backed by a verified quote`;
}
