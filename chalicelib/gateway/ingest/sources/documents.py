"""``documents`` connector: files uploaded through presigned S3 PUT URLs into the region's
``documents`` bucket (``uploads/<workspace>/<connector>/<document id>/<file name>``). A sync splits each
new or changed document (PDF, Word, HTML, Markdown, text: ``document_text``) into passages (dataset rows
``document_id, file_name, passage_no, page, text, char_start, char_end, uploaded_at``; ``page`` is the PDF
page the passage is on, null for formats without pages) for retrieval; rows of changed or deleted
documents are replaced. Documents are parsed here only, in the sync worker, each in a bounded child process
(``bounded_parser``: CPU time, memory, pages, decompressed size, XML expansion). A file that cannot be read
(scanned, encrypted, damaged, a zip bomb, over a bound, ...) is skipped whole and named with the reason in
the run's details (``skipped``), and the run goes on with the other files: a document is never half indexed,
and a skipped file is not read again until it changes (its version is in the cursor like any other).
"""
from __future__ import annotations

import os
import re
import time
from typing import Any

from chalicelib.core import aws, clock
from chalicelib.core.config import settings
from chalicelib.core.http.validation import F
from chalicelib.core.ids import new_id
from chalicelib.gateway.ingest.sources import Batch, Record, SourceError, Src, document_text
from chalicelib.gateway.ingest.sources.bounded_parser import BoundedParser
from chalicelib.gateway.ingest.sources.s3_objects import diff, fetch, list_objects

BUCKET = "documents"
UPLOAD_TTL_S = 900
MAX_UPLOAD_BYTES = document_text.MAX_BYTES
TEXT_TYPES = {".txt": "text/plain", ".md": "text/markdown", ".markdown": "text/markdown", ".csv": "text/csv",
              ".json": "application/json", ".html": "text/html", ".htm": "text/html", ".log": "text/plain",
              ".pdf": "application/pdf",
              ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document"}
FILENAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._ -]{0,199}$")
FIELDS = {
    "max_passage_chars": F(int, minimum=200, maximum=8000),
    "overlap_chars": F(int, minimum=0, maximum=1000),
}
SECRETS: tuple[str, ...] = ()
UPLOAD_FIELDS = {
    "file_name": F(str, required=True, min_len=1, max_len=200),
    "content_type": F(str, max_len=100),
}


def check_config(config: dict[str, Any]) -> list[dict[str, str]]:
    if config.get("overlap_chars", 0) >= config.get("max_passage_chars", 1000):
        return [{"field": "overlap_chars", "message": "must be smaller than max_passage_chars"}]
    return []


def prefix(workspace_id: str, connector_id: str) -> str:
    return f"uploads/{workspace_id}/{connector_id}/"


def health(src: Src) -> None:
    try:
        aws.client("s3", src.region).head_bucket(Bucket=aws.bucket_name(BUCKET, src.region))
    except Exception as err:  # noqa: BLE001 - reported as health
        raise SourceError(f"documents bucket unavailable ({type(err).__name__})") from None


def presign_upload(src: Src, file_name: str, content_type: str | None) -> dict[str, Any]:
    """A presigned PUT URL for one new document (valid 15 minutes)."""
    ext = os.path.splitext(file_name.lower())[1]
    ctype = content_type or TEXT_TYPES.get(ext, "application/octet-stream")
    doc_id = new_id("doc")
    key = prefix(src.workspace_id, src.connector_id) + f"{doc_id}/{file_name}"
    url = aws.client("s3", src.region).generate_presigned_url(
        "put_object", Params={"Bucket": aws.bucket_name(BUCKET, src.region), "Key": key, "ContentType": ctype},
        ExpiresIn=UPLOAD_TTL_S, HttpMethod="PUT")
    return {"document_id": doc_id, "file_name": file_name, "method": "PUT", "upload_url": url,
            "headers": {"Content-Type": ctype}, "expires_at": clock.iso(clock.now() + UPLOAD_TTL_S),
            "max_bytes": MAX_UPLOAD_BYTES}


def split_passages(text: str, max_chars: int = 1000, overlap: int = 100) -> list[tuple[int, int, str]]:
    """Passages ``(start, end, text)``: paragraphs packed up to ``max_chars``; a longer paragraph is cut
    at whitespace with ``overlap`` characters repeated at the start of the next passage."""
    out: list[tuple[int, int, str]] = []
    paragraphs = [(m.start(), m.end()) for m in re.finditer(r"\S(?:.*?\S)?(?=\s*\n\s*\n|\s*$)", text, re.S)]
    cur_start: int | None = None
    cur_end = 0
    for p_start, p_end in paragraphs:
        if cur_start is not None and p_end - cur_start <= max_chars:
            cur_end = p_end
            continue
        if cur_start is not None:
            out.append((cur_start, cur_end, text[cur_start:cur_end]))
            cur_start = None
        if p_end - p_start <= max_chars:
            cur_start, cur_end = p_start, p_end
            continue
        pos = p_start
        while pos < p_end:
            end = min(pos + max_chars, p_end)
            if end < p_end:
                cut = text.rfind(" ", pos + max_chars // 2, end)
                end = cut if cut > pos else end
            out.append((pos, end, text[pos:end].strip()))
            if end >= p_end:
                break
            pos = max(end - overlap, pos + 1)
            while pos < p_end and text[pos].isspace():
                pos += 1
    if cur_start is not None:
        out.append((cur_start, cur_end, text[cur_start:cur_end]))
    return out


def document_records(doc_id: str, file_name: str, key: str, uploaded: str, pages: list[document_text.Page],
                     max_chars: int, overlap: int) -> list[Record]:
    """The rows of one document: passages split page by page, their character spans in the document's
    whole text (pages joined by a blank line), each with its page number (PDF)."""
    records: list[Record] = []
    offset = 0
    n = 0
    for page in pages:
        for start, end, passage in split_passages(page.text, max_chars, overlap):
            n += 1
            records.append(Record(f"{doc_id}#{n}", {
                "document_id": doc_id, "file_name": file_name, "passage_no": n, "page": page.number,
                "text": passage, "char_start": offset + start, "char_end": offset + end, "uploaded_at": uploaded},
                source=key))
        offset += len(page.text) + 2
    return records


def parse_budget_s() -> float:
    """Seconds one sync may spend reading documents (``DOCUMENT_SYNC_PARSE_SECONDS``, default 150: with one
    file's own wall bound on top, a sync stays inside the workers function's 300 s)."""
    return settings().document_sync_parse_seconds


def read(src: Src, cursor: dict[str, Any] | None, mode: str) -> Batch:
    """The passages of every new or changed document. Files are read one after the other until the sync's
    reading time (``parse_budget_s``) runs out; the ones left are named in ``skipped`` as deferred, keep their
    old version in the cursor (and their old rows), and the next sync reads them."""
    bucket = aws.bucket_name(BUCKET, src.region)
    base = prefix(src.workspace_id, src.connector_id)
    listing = list_objects(aws.client("s3", src.region), bucket, base, lambda k: True)
    changed, deleted = diff(listing, cursor, mode)
    max_chars = int(src.config.get("max_passage_chars", 1000))
    overlap = int(src.config.get("overlap_chars", 100))
    records: list[Record] = []
    skipped: list[str] = []
    deferred: list[str] = []
    deadline = time.monotonic() + parse_budget_s()
    with BoundedParser() as parser:
        for key in changed:
            doc_id, _, file_name = key[len(base):].partition("/")
            if time.monotonic() > deadline:
                deferred.append(key)
                skipped.append(f"{file_name or key} was not read yet: this sync's time for reading documents ran "
                               "out; the next sync reads it.")
                continue
            try:
                size = listing[key]["size"]
                if size > MAX_UPLOAD_BYTES:  # the presigned PUT cannot cap the size: named, never downloaded
                    raise document_text.Unreadable("too_large", f"{file_name or key} is {size / 1048576:.1f} MiB; "
                                                   f"the limit is {MAX_UPLOAD_BYTES / 1048576:.0f} MiB.")
                data = fetch(aws.client("s3", src.region), bucket, key)
                pages = parser.extract(file_name or key, data, MAX_UPLOAD_BYTES)
            except document_text.Unreadable as err:
                skipped.append(err.message[:300])  # the message names the file
                continue
            uploaded = listing[key]["last_modified"].strftime("%Y-%m-%d %H:%M:%S")
            records.extend(document_records(doc_id, file_name, key, uploaded, pages, max_chars, overlap))
    seen = (cursor or {}).get("objects", {})
    objects = {k: m["etag"] for k, m in listing.items() if k not in deferred}
    objects.update({k: seen[k] for k in deferred if k in seen})  # read again by the next sync
    return Batch(records=records, cursor={"objects": objects}, rows_read=len(records),
                 complete=(mode == "FULL_REFRESH" and not deferred),
                 replaced_sources=(set(changed) - set(deferred)) | set(deleted),
                 primary_key=["document_id", "passage_no"], skipped=skipped)


def cleanup(src: Src) -> int:
    """Delete the connector's uploaded files (on connector deletion); returns how many."""
    s3 = aws.client("s3", src.region)
    bucket = aws.bucket_name(BUCKET, src.region)
    n = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix(src.workspace_id,
                                                                                          src.connector_id)):
        objs = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if objs:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": objs, "Quiet": True})
            n += len(objs)
    return n
