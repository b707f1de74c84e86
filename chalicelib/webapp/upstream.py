"""Forward the browser's API calls to the platform API and the gateway with the session's token.

The app's own origin serves ``/api/platform/...`` and ``/api/gateway/...``; each call is sent to
``{base_url}`` or ``{gateway_url}`` with ``Authorization: Bearer <access token from the HttpOnly
cookie>``. Only ``/v1/...`` (and ``/graphql`` on the gateway) may be reached, every path segment is
re-quoted (no ``..``, no empty segment, no scheme or host from the browser), redirects are not
followed (a 3xx is passed back as it is), and only a fixed set of request and response headers passes.
The calls go through the one outbound client (``core/http/outbound.py``) with ``outbound.TRUSTED``: the
addresses are the deployment's own (its configuration, or an upload address its gateway issued). An
event stream (``text/event-stream``: a chat answer being generated) is passed on as it arrives, not
read whole.
"""
from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from chalicelib.core import regions
from chalicelib.core.config import settings
from chalicelib.core.http import outbound

TIMEOUT_SECONDS = 60  # between two reads (also between two pieces of an event stream)
TOTAL_SECONDS = 600  # for one call, from connect to its last byte
TIMEOUTS = outbound.Timeouts(connect=10, read=TIMEOUT_SECONDS, total=TOTAL_SECONDS)
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
MAX_UPLOAD_BYTES = 5 * 1024 * 1024
SEGMENT_RE = re.compile(r"^[A-Za-z0-9._~:@!$'()*+,;=-]{1,256}$")
FORWARDED_REQUEST_HEADERS = ("content-type", "accept", "idempotency-key", "last-event-id", "prefer", "x-correlation-id")
FORWARDED_RESPONSE_HEADERS = ("content-type", "x-correlation-id", "location", "retry-after")


def base_of(surface: str) -> str | None:
    return {"platform": settings().base_url, "gateway": settings().gateway_url}.get(surface)


def upstream_path(surface: str, segments: list[str]) -> str | None:
    """The upstream path for the captured segments, or None when it is not an allowed API path."""
    if not segments or any(s in (".", "..") or not SEGMENT_RE.match(s) for s in segments):
        return None
    if segments[0] != "v1" and not (surface == "gateway" and segments == ["graphql"]):
        return None
    return "/" + "/".join(quote(s, safe=":@!$'()*+,;=-._~") for s in segments)


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    headers: dict[str, str]
    stream: Iterator[str] | None = None  # an event stream, passed on as it arrives (``body`` is empty)


def send(method: str, url: str, token: str | None, body: bytes | None, headers: dict[str, str],
         timeouts: outbound.Timeouts = TIMEOUTS) -> Answer:
    """One upstream call; network failures become a 502 problem the page can show."""
    out = {k: v for k, v in headers.items() if k.lower() in FORWARDED_REQUEST_HEADERS and v}
    out["User-Agent"] = "aiplat-webapp/1"
    if token:
        out["Authorization"] = f"Bearer {token}"
    try:
        resp = outbound.open_stream(method, url, headers=out, body=body or None, policy=outbound.TRUSTED,
                                    timeouts=timeouts, max_bytes=MAX_RESPONSE_BYTES, redirects="return")
        if str(resp.headers.get("Content-Type") or "").startswith("text/event-stream"):
            return Answer(resp.status, b"", _kept(resp.headers), _relay(resp))
        with resp:
            return Answer(resp.status, resp.read(), _kept(resp.headers))
    except outbound.OutboundError:
        return Answer(502, b'{"type":"about:blank","title":"Bad Gateway","status":502,"code":"upstream_unreachable",'
                           b'"detail":"The service behind this page is not reachable.","correlation_id":""}',
                      {"Content-Type": "application/problem+json"})


def _relay(resp: outbound.Stream) -> Iterator[str]:
    """An upstream event stream, piece by piece as it arrives (never waiting for a full buffer), within
    the call's size and time limits. Closing the iterator (the browser went away) closes the upstream
    connection, which stops the answer there."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    try:
        while True:
            try:
                data = resp.read_some()
            except outbound.OutboundError:
                return
            if not data:
                break
            text = decoder.decode(data)
            if text:
                yield text
        tail = decoder.decode(b"", final=True)
        if tail:
            yield tail
    finally:
        resp.close()


def _kept(headers: Any) -> dict[str, str]:
    return {k: v for k, v in (headers or {}).items() if k.lower() in FORWARDED_RESPONSE_HEADERS}


def url_for(surface: str, segments: list[str], query: dict[str, Any] | None) -> str | None:
    base, path = base_of(surface), upstream_path(surface, segments)
    if base is None or path is None:
        return None
    return base + path + (("?" + urlencode(query, doseq=True)) if query else "")


def regional_retry(surface: str, answer: Answer, url: str) -> str | None:
    """After a 421 ``wrong_region`` the same call goes to the deployment the answer names, but only when
    that address is one of this deployment's configured regional addresses (never one from a body)."""
    if answer.status != 421:
        return None
    try:
        named = json.loads(answer.body)
    except ValueError:
        return None
    key = "gateway_url" if surface == "gateway" else "api_base_url"
    target = str(named.get(key) or "").rstrip("/")
    known = {str(e[key]).rstrip("/") for e in regions.public_endpoints().values()}
    if target not in known:
        return None
    base = target[: -len("/v1")] if key == "api_base_url" and target.endswith("/v1") else target
    current = base_of(surface) or ""
    return base + url[len(current):] if url.startswith(current) and base != current else None


def put_presigned(url: str, data: bytes, content_type: str) -> int:
    """PUT an uploaded document to the presigned URL the gateway issued (server side, so the browser's
    Content-Security-Policy stays ``connect-src 'self'``)."""
    try:
        return outbound.request("PUT", url, headers={"Content-Type": content_type}, body=data,
                                policy=outbound.TRUSTED, timeouts=TIMEOUTS, redirects="return").status
    except outbound.OutboundError:
        return 502
