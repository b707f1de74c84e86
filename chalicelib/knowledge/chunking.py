"""Chunks: the unit of retrieval and citation. A chunk has a stable id (the same source text at the
same place gives the same id on every re-index), its source (document or dataset row), the snapshot it
came from, a character span in its source and its text.

- Documents (the ``documents`` connector's dataset): each stored passage is a chunk; its span is the
  passage's place in the uploaded document (``char_start``/``char_end``); a passage of a PDF page is
  titled with its page ("terms.pdf, page 3"), so citations name it.
- Other datasets: each row is a chunk whose text is ``field: value; ...`` over the fields under the
  ``ALLOW`` policy only; the span is within that text. Fields under MASK, HASH, REDACT or DENY never
  enter a chunk, so their clear values are never written into an index.

Every identity derived from row values is opaque (``gateway/reader``): a row's key (its primary-key
columns, whatever their policies) enters a chunk only as a keyed hash, in its id, ``doc`` and title; a
document id only in the clear when ``document_id`` is ALLOW. ``fields`` names every field whose value
is in the chunk in the clear (text, title or ``doc``), so retrieval masks a chunk as soon as one of them
leaves ALLOW. A row of a dataset with a ``document_id`` column belongs to that document (its ``doc``), so
the document's ACL covers it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DOCUMENT = "document"
DATASET = "dataset"
DOC_FIELDS = ("document_id", "file_name", "text", "char_start", "char_end")
DOC_COLUMN = "document_id"
Ident = Callable[..., str]  # (purpose, *parts) -> a keyed hash bound to the dataset (gateway/reader.opaque_ref)
DocRef = Callable[[str], str]  # a document id -> how chunks name it (gateway/reader.document_ref)
MAX_ROW_CHARS = 4000


@dataclass(frozen=True)
class Chunk:
    id: str
    kind: str  # document | dataset
    dataset_id: str
    doc: str  # document id, or the row key
    version: str
    title: str
    start: int
    end: int
    text: str
    fields: tuple[str, ...]  # dataset fields whose values are in the text

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "dataset_id": self.dataset_id, "doc": self.doc,
                "version": self.version, "title": self.title, "start": self.start, "end": self.end,
                "text": self.text, "fields": list(self.fields)}

    @staticmethod
    def from_json(d: dict[str, Any]) -> Chunk:
        return Chunk(**{**d, "fields": tuple(d["fields"])})


def chunk_id(ident: Ident, doc: str, start: int, end: int, text: str) -> str:
    return "chk_" + ident("chunk", doc, str(start), str(end), text)[:24]


def allowed_fields(fields: list[dict[str, Any]]) -> list[str]:
    return [f["name"] for f in fields if f.get("policy") == "ALLOW" and not f["name"].startswith("_")]


def is_documents(fields: list[dict[str, Any]]) -> bool:
    return {f["name"] for f in fields} >= set(DOC_FIELDS)


def document_chunks(dataset_id: str, version: str, fields: list[dict[str, Any]], names: list[str],
                    rows: list[tuple], ident: Ident, doc_ref: DocRef) -> list[Chunk]:
    """Passages of uploaded documents (nothing when the ``text`` field is not ALLOW)."""
    allow = allowed_fields(fields)
    if "text" not in allow:
        return []
    col = {n: i for i, n in enumerate(names)}
    title_ok = "file_name" in allow
    out = []
    for row in rows:
        text = row[col["text"]]
        if not isinstance(text, str) or not text.strip():
            continue
        raw_doc = str(row[col[DOC_COLUMN]])
        doc = doc_ref(raw_doc)
        start, end = int(row[col["char_start"]] or 0), int(row[col["char_end"]] or len(text))
        title = str(row[col["file_name"]]) if title_ok else doc
        page = row[col["page"]] if "page" in col else None
        if page is not None and str(page).strip():
            title = f"{title}, page {int(page)}"
        used = ("text",) + (("file_name",) if title_ok else ()) + ((DOC_COLUMN,) if doc == raw_doc else ())
        out.append(Chunk(chunk_id(ident, raw_doc, start, end, text), DOCUMENT, dataset_id, doc, version, title,
                         start, end, text, used))
    return out


def row_chunks(dataset_id: str, dataset_name: str, version: str, fields: list[dict[str, Any]], names: list[str],
               rows: list[tuple], ident: Ident, doc_ref: DocRef) -> list[Chunk]:
    """One chunk per row over its ALLOW fields, named by an opaque hash of its key."""
    allow = [n for n in allowed_fields(fields) if n in names]
    if not allow:
        return []
    col = {n: i for i, n in enumerate(names)}
    key_col = col.get("_key")
    doc_col = col.get(DOC_COLUMN)
    out = []
    for n, row in enumerate(rows):
        parts = [(f, row[col[f]]) for f in allow if row[col[f]] is not None and str(row[col[f]]) != ""]
        if not parts:
            continue
        text = "; ".join(f"{f}: {v}" for f, v in parts)[:MAX_ROW_CHARS]
        row_ref = ident("row", str(row[key_col]) if key_col is not None else str(n))[:24]
        used = tuple(f for f, _ in parts)
        doc = "row_" + row_ref
        if doc_col is not None and row[doc_col] is not None:
            raw_doc = str(row[doc_col])
            doc = doc_ref(raw_doc)
            if doc == raw_doc and DOC_COLUMN not in used:
                used += (DOC_COLUMN,)
        out.append(Chunk(chunk_id(ident, row_ref, 0, len(text), text), DATASET, dataset_id, doc, version,
                         f"{dataset_name} row {row_ref[:12]}", 0, len(text), text, used))
    return out
