"""``http`` connector: a paginated JSON API with an updated-since cursor.

Each page is ``GET <url>?<since_param>=<watermark>&<page_size_param>=<n>[&<cursor_param>=<next>]``
answering ``{"<items_field>": [...], "<next_field>": "<opaque or null>"}``. Records are identified by
``id_field``; the cursor saved after a successful sync is the highest ``updated_field`` seen (compared
as strings, so use ISO 8601 UTC timestamps or zero-padded values). The API key (optional) is sent in
``api_key_header``; it is stored encrypted and never returned. Outside the local stage, the URL must be
https and must not resolve to a private, loopback or link-local address.

Every page is fetched by the one outbound client (``chalicelib/core/http/outbound.py``): the host is resolved
once per request, every address it resolves to is checked, and the connection is made to that checked
address, so a DNS answer that changes between check and connect (DNS rebinding) cannot redirect the request.
Instance-metadata addresses are refused in every stage. A redirect fails the sync (never followed). The URL is shown back with its
query values and any user information replaced (``public_url``): tokens in a query string stay hidden.
"""
from __future__ import annotations

import ipaddress
import json
import urllib.parse
from typing import Any

from chalicelib.core.config import settings
from chalicelib.core.http import outbound
from chalicelib.core.http.validation import F
from chalicelib.gateway.ingest.sources import Batch, Record, RecordSpool, SourceError, Src, resolve_columns

TIMEOUT_S = 15  # to connect, and between two reads
TOTAL_S = 120  # for one page, from connect to its last byte
MAX_PAGE_BYTES = 16 * 1024 * 1024
_NAME = F(str, min_len=1, max_len=128)
FIELDS = {
    "url": F(str, required=True, min_len=8, max_len=2048),
    "items_field": _NAME,
    "next_field": _NAME,
    "cursor_param": _NAME,
    "since_param": _NAME,
    "updated_field": _NAME,
    "id_field": _NAME,
    "page_size": F(int, minimum=1, maximum=1000),
    "page_size_param": _NAME,
    "max_pages": F(int, minimum=1, maximum=100_000),
    "api_key": F(str, min_len=1, max_len=4096),
    "api_key_header": _NAME,
}
SECRETS: tuple[str, ...] = ("api_key",)
DEFAULTS = {"items_field": "items", "next_field": "next", "cursor_param": "cursor", "since_param": "updated_since",
            "updated_field": "updated_at", "id_field": "id", "page_size": 100, "page_size_param": "limit",
            "max_pages": 10_000, "api_key_header": "X-API-Key"}


def _local() -> bool:
    return settings().stage in ("local", "test")


def check_config(config: dict[str, Any]) -> list[dict[str, str]]:
    url = urllib.parse.urlsplit(config["url"])
    if url.scheme not in ("http", "https") or not url.hostname:
        return [{"field": "url", "message": "must be an absolute http(s) URL"}]
    if url.scheme != "https" and not _local():
        return [{"field": "url", "message": "must use https"}]
    if url.username or url.password:
        return [{"field": "url", "message": "must not carry credentials; use api_key"}]
    return []


REDACTED = "***"


def public_url(url: str) -> str:
    """``url`` as shown to callers: user information dropped and every query value replaced."""
    try:
        split = urllib.parse.urlsplit(url)
        host = split.hostname or ""
        netloc = (f"[{host}]" if ":" in host else host) + (f":{split.port}" if split.port else "")
        query = urllib.parse.urlencode([(k, REDACTED) for k, _ in urllib.parse.parse_qsl(split.query,
                                                                                          keep_blank_values=True)],
                                       safe="*")
        return urllib.parse.urlunsplit((split.scheme, netloc, split.path, query, ""))
    except ValueError:
        return REDACTED


def _policy() -> outbound.Policy:
    return outbound.Policy(private=_local(), declared=False)


def check_address(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, host: str) -> None:
    """Refuse metadata and link-local always; anything not globally routable outside the local stage."""
    try:
        outbound.check_address(ip, host, policy=_policy())
    except outbound.Refused as err:
        raise SourceError(str(err), permanent=True) from None


def _cfg(src: Src) -> dict[str, Any]:
    return {**DEFAULTS, **src.config}


def _get(cfg: dict[str, Any], params: dict[str, Any]) -> Any:
    split = urllib.parse.urlsplit(cfg["url"])
    host = split.hostname or ""
    query = urllib.parse.parse_qsl(split.query) + [(k, str(v)) for k, v in params.items() if v is not None]
    url = urllib.parse.urlunsplit((split.scheme, split.netloc, split.path, urllib.parse.urlencode(query), ""))
    headers = {"Accept": "application/json", "User-Agent": "aiplat-gateway-sync/1"}
    if cfg.get("api_key"):
        headers[cfg["api_key_header"]] = cfg["api_key"]
    try:
        resp = outbound.request("GET", url, headers=headers, policy=_policy(), max_bytes=MAX_PAGE_BYTES,
                                timeouts=outbound.Timeouts(connect=TIMEOUT_S, read=TIMEOUT_S, total=TOTAL_S))
    except outbound.Refused as err:  # an address that is not allowed stays so; a name may resolve later
        raise SourceError(str(err), permanent=err.kind in ("forbidden", "private")) from None
    except outbound.OutboundError as err:
        if err.kind == "too_large":
            raise SourceError("a page is larger than 16 MiB") from None
        # a redirect is refused every time; timeouts and broken connections may heal
        raise SourceError(str(err), permanent=err.kind == "redirect") from None
    if resp.status != 200:  # a client error other than timeout/rate limit will not heal by itself; 5xx may
        raise SourceError(f"{host} answered HTTP {resp.status}",
                          permanent=400 <= resp.status < 500 and resp.status not in (408, 429))
    try:
        return json.loads(resp.body)
    except ValueError:
        raise SourceError(f"{host} did not answer JSON") from None


def health(src: Src) -> None:
    cfg = _cfg(src)
    page = _get(cfg, {cfg["page_size_param"]: 1})
    if not isinstance(page, dict) or not isinstance(page.get(cfg["items_field"]), list):
        raise SourceError(f"the answer has no '{cfg['items_field']}' list")


def read(src: Src, cursor: dict[str, Any] | None, mode: str) -> Batch:
    cfg = _cfg(src)
    watermark = (cursor or {}).get("watermark") if mode == "INCREMENTAL" else None
    records = RecordSpool()  # bounded memory: pages are spooled to local disk
    try:
        return _read_pages(cfg, mode, watermark, records, src)
    except BaseException:
        records.close()
        raise


def _read_pages(cfg: dict[str, Any], mode: str, watermark: Any, records: RecordSpool, src: Src) -> Batch:
    high = watermark
    page_cursor = None
    pages_read = 0
    for _ in range(cfg["max_pages"]):
        page = _get(cfg, {cfg["since_param"]: watermark, cfg["page_size_param"]: cfg["page_size"],
                          cfg["cursor_param"]: page_cursor})
        items = page.get(cfg["items_field"]) if isinstance(page, dict) else None
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise SourceError(f"the answer has no '{cfg['items_field']}' list of objects", permanent=True)
        for item in items:
            id_field, updated_field = resolve_columns([cfg["id_field"], cfg["updated_field"]], item.keys())
            if item.get(id_field) is None:
                raise SourceError(f"a record has no '{cfg['id_field']}'", permanent=True)
            records.append(Record(str(item[id_field]), item))
            mark = item.get(updated_field)
            if mark is not None and (high is None or str(mark) > str(high)):
                high = str(mark)
        src.report(pages_read := pages_read + 1, len(records))
        page_cursor = page.get(cfg["next_field"])
        if not page_cursor or not items:
            break
    else:
        raise SourceError(f"more than {cfg['max_pages']} pages")
    return Batch(records=records, cursor={"watermark": high}, rows_read=len(records),
                 complete=(mode == "FULL_REFRESH"), primary_key=[cfg["id_field"]], cleanup=records.close)
