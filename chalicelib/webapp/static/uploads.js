// Document uploads from the browser: a drop zone (and a file picker) for several files at once, each
// with its own line: progress while it is sent, then its result: refused with the reason (the app's
// server checks each file without parsing it: empty, wrong extension, zip bomb, too large), or stored;
// then one sync reads and indexes the stored files and each line says "indexed" or why not (a scan, an
// encrypted PDF, a file over the reading bounds).
// Used by the connector page, the knowledge page and the chat box.
import { gateway, refreshSession, signInAgain, idempotencyKey } from "./api.js";
import { h } from "./dom.js";

export const ACCEPT = ".pdf,.docx,.md,.markdown,.txt,.html,.htm,.csv,.json";
export const MAX_BYTES = 5 * 1024 * 1024;
export const UPLOAD_CONNECTOR_NAME = "Uploaded documents";
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The name the gateway accepts (letters, digits, . _ - and spaces, starting with a letter or digit).
export function safeName(name) {
  let out = String(name).normalize("NFKD").replace(/[^\x20-\x7e]/g, "").replace(/[^A-Za-z0-9._ -]/g, "_").trim();
  if (!/^[A-Za-z0-9]/.test(out)) out = "file_" + out;
  if (out.length > 200) { const dot = out.lastIndexOf("."); out = out.slice(0, 200 - (out.length - dot)) + out.slice(dot); }
  return out;
}

// The workspace's documents connector for uploads made outside a connector page: the one named
// "Uploaded documents" (every page of the list is looked at), created on first use. Never another
// documents connector (a synced handbook keeps only its own files).
export async function uploadConnector() {
  let after = "";
  do {
    const page = await gateway("/v1/connectors", { query: { category: "DOCUMENTS", limit: 200, after } });
    const named = page.connectors.find((c) => c.kind === "documents" && c.name === UPLOAD_CONNECTOR_NAME);
    if (named) return named;
    after = page.has_more ? page.next_cursor : "";
  } while (after);
  return gateway("/v1/connectors", { method: "POST", body: { name: UPLOAD_CONNECTOR_NAME, kind: "documents", config: {}, description: "Files uploaded from the app (knowledge page and chat)." } });
}

// One file to /api/upload/{connector}: XMLHttpRequest, because fetch reports no upload progress.
function send(connectorId, file, name, onProgress, retried = false) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", `/api/upload/${encodeURIComponent(connectorId)}`);
    xhr.setRequestHeader("X-Requested-With", "app");
    xhr.setRequestHeader("Content-Type", "application/octet-stream");
    xhr.setRequestHeader("X-File-Name", encodeURIComponent(name));
    xhr.setRequestHeader("X-File-Type", file.type || "application/octet-stream");
    xhr.upload.onprogress = (ev) => { if (ev.lengthComputable) onProgress(ev.loaded / ev.total); };
    xhr.onerror = () => reject(new Error(`${file.name}: the upload was interrupted (network). Try again.`));
    xhr.onload = async () => {
      let body = null;
      try { body = JSON.parse(xhr.responseText); } catch { body = null; }
      if (xhr.status === 401 && !retried) {
        if (await refreshSession()) { send(connectorId, file, name, onProgress, true).then(resolve, reject); return; }
        signInAgain();
      }
      if (xhr.status >= 200 && xhr.status < 300) resolve(body);
      else reject(new Error((body && (body.detail || body.title)) || `${file.name}: upload failed (HTTP ${xhr.status}).`));
    };
    xhr.send(file);
  });
}

function fileLine(file) {
  const bar = h("progress", { max: "100", value: "0", "aria-label": `Upload progress of ${file.name}` });
  const result = h("span", { class: "upload-result" }, "waiting");
  const li = h("li", { class: "upload", "data-file": file.name, "data-state": "waiting" },
    h("span", { class: "upload-name" }, file.name), " ", bar, " ", result);
  const set = (state, text, cls = "") => {
    li.dataset.state = state;
    result.className = `upload-result ${cls}`.trim();
    result.textContent = text;
    if (state !== "sending") bar.hidden = true;
  };
  return { li, bar, set };
}

// Upload files, then sync once and say per file whether it was indexed. ``getConnector`` returns the
// connector (created on first use for the knowledge page and chat).
export async function uploadFiles(files, getConnector, list, { onIndexed } = {}) {
  const lines = [...files].map((f) => ({ file: f, ...fileLine(f) }));
  for (const l of lines) list.append(l.li);
  const stored = [];
  let connector = null;
  for (const l of lines) {
    if (l.file.size > MAX_BYTES) { l.set("refused", `${l.file.name} is ${(l.file.size / 1048576).toFixed(1)} MiB; files uploaded from the app are limited to 5 MiB.`, "error"); continue; }
    if (l.file.size === 0) { l.set("refused", `${l.file.name} is empty (0 bytes): nothing to index.`, "error"); continue; }
    try {
      connector = connector || await getConnector();
      l.set("sending", "sending…");
      const name = safeName(l.file.name);
      const doc = await send(connector.id, l.file, name, (x) => { l.bar.value = Math.round(x * 100); });
      l.set("stored", "stored; indexing…");
      stored.push({ ...l, name, doc });
    } catch (err) {
      l.set("refused", err.message, "error");
    }
  }
  if (!stored.length || !connector) return { connector, stored: 0, indexed: 0 };
  let run = await gateway(`/v1/connectors/${encodeURIComponent(connector.id)}/sync`, { method: "POST", headers: { "Idempotency-Key": idempotencyKey() }, body: { mode: "INCREMENTAL" } });
  while (["QUEUED", "RUNNING", "RETRYING"].includes(run.status)) {
    await sleep(1000);
    run = await gateway(`/v1/connectors/${encodeURIComponent(connector.id)}/syncs/${encodeURIComponent(run.id)}`);
  }
  let indexed = 0;
  for (const l of stored) {
    const why = (run.skipped || []).find((s) => s.startsWith(l.name));
    if (run.status !== "SUCCEEDED") l.set("failed", `not indexed: the sync failed (${run.error || "no reason given"}).`, "error");
    else if (why) l.set("refused", why, "error");
    else { l.set("indexed", "indexed: ready to search and cite", "ok"); indexed += 1; }
  }
  if (onIndexed) onIndexed(indexed, connector);
  return { connector, stored: stored.length, indexed };
}

// The drop zone with its picker and per-file list.
export function dropZone(getConnector, { label = "Drop files here or choose them", onIndexed } = {}) {
  const input = h("input", { type: "file", multiple: true, accept: ACCEPT, id: "upload-files", class: "sr-only" });
  const list = h("ul", { class: "uploads", id: "upload-list", "aria-live": "polite" });
  const zone = h("div", { class: "dropzone", id: "dropzone" },
    h("p", {}, label),
    h("label", { for: "upload-files", class: "button secondary" }, "Choose files"), input,
    h("p", { class: "hint" }, "PDF, Word (.docx), Markdown, HTML or plain text; up to 5 MiB each. Scanned PDFs need text recognition (OCR) first."));
  const start = (files) => { if (files && files.length) uploadFiles(files, getConnector, list, { onIndexed }).catch((err) => list.append(h("li", { class: "error" }, err.message))); };
  input.addEventListener("change", () => { start(input.files); input.value = ""; });
  zone.addEventListener("dragover", (ev) => { ev.preventDefault(); zone.classList.add("over"); });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (ev) => { ev.preventDefault(); zone.classList.remove("over"); start(ev.dataTransfer.files); });
  return h("div", { class: "upload-box" }, zone, list);
}
