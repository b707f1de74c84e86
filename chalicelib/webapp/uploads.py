"""One document uploaded from the app into a documents connector (the ``/api/upload/{connector_id}`` route).

The order is what bounds what a caller can cost the app:

1. the declared size (``Content-Length``) is checked before the body is read: over ``MAX_UPLOAD_BYTES`` is a
   413 (the local server refuses it before reading the body at all: ``infra/local_run.py``);
2. the gateway is asked for the upload grant with the caller's token: a caller who may not upload to the
   connector (a Viewer, a Member, someone outside the workspace) gets the gateway's 403/404 and the body is
   never read;
3. only then the body is read, its real size checked, and the checks that need no parser run
   (``document_text.check``: empty, wrong extension, content that does not match it, an old or
   password-protected Word file, a zip bomb from the ZIP's central directory): a 422 names the file and
   nothing is stored;
4. the bytes are PUT to the presigned address (server side: the page's CSP keeps ``connect-src 'self'``).

The document is parsed only by the sync worker, in its bounded child process; a file the parser cannot read
(a scan, an encrypted PDF, one over a parse bound) is named with its reason on the sync run.
"""
from __future__ import annotations

import json
from collections.abc import Callable

from chalicelib.core.http.errors import ApiError
from chalicelib.gateway.ingest.sources import document_text
from chalicelib.webapp import upstream

MAX_UPLOAD_BYTES = upstream.MAX_UPLOAD_BYTES
JSON = "application/json"


def too_large(name: str, size: int) -> ApiError:
    return ApiError(413, "too_large", f"{name or 'The file'} is {size / 1048576:.1f} MiB; documents uploaded "
                                      f"from the app are limited to {MAX_UPLOAD_BYTES >> 20} MiB.")


def declared_too_large(name: str, content_length: str | None) -> ApiError | None:
    """The 413 for a declared body over the cap (None when within it, or not declared)."""
    try:
        size = int(content_length or "0")
    except ValueError:
        return ApiError(400, "invalid_request", "Content-Length is not a number.")
    return too_large(name, size) if size > MAX_UPLOAD_BYTES else None


def store(token: str, connector_id: str, name: str, content_type: str,
          read_body: Callable[[], bytes]) -> upstream.Answer:
    """Steps 2 to 4 of the module docstring; the answer to give the page (the gateway's own refusal as it is)."""
    url = upstream.url_for("gateway", ["v1", "connectors", connector_id, "uploads"], None)
    if url is None:
        raise ApiError(404, "not_found", "No such connector.")
    answer = upstream.send("POST", url, token, json.dumps({"file_name": name, "content_type": content_type}).encode(),
                           {"content-type": JSON})
    if answer.status != 201:
        return answer
    grant = json.loads(answer.body)
    target = grant.get("upload_url") or grant.get("url") or ""
    if not str(target).startswith(("http://", "https://")):
        raise ApiError(502, "upstream_invalid", "The gateway did not issue an upload address.")
    data = read_body()
    if len(data) > MAX_UPLOAD_BYTES:
        raise too_large(name, len(data))
    try:  # no parser here: the sync worker reads the document, within its bounds
        document_text.check(name or "document", data, MAX_UPLOAD_BYTES)
    except document_text.Unreadable as err:
        raise ApiError(422, err.code, err.message) from None
    signed_type = (grant.get("headers") or {}).get("Content-Type") or content_type
    status = upstream.put_presigned(target, data, signed_type)
    if status >= 300:
        raise ApiError(502, "upload_failed", f"Storing the document failed (HTTP {status}).")
    shown = {k: v for k, v in grant.items() if k not in ("upload_url", "url", "fields", "headers")}
    return upstream.Answer(201, json.dumps(shown).encode(), {"Content-Type": JSON})
