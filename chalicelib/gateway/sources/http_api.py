"""``http`` connector: a paginated JSON API with an updated-since cursor.

Each page is ``GET <url>?<since_param>=<watermark>&<page_size_param>=<n>[&<cursor_param>=<next>]``
answering ``{"<items_field>": [...], "<next_field>": "<opaque or null>"}``. Records are identified by
``id_field``; the cursor saved after a successful sync is the highest ``updated_field`` seen (compared
as strings, so use ISO 8601 UTC timestamps or zero-padded values). The API key (optional) is sent in
``api_key_header``; it is stored encrypted and never returned. Outside the local stage, the URL must be
https and must not resolve to a private, loopback or link-local address.
"""
from __future__ import annotations

import ipaddress
import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from chalicelib.core.config import settings
from chalicelib.core.validation import F
from chalicelib.gateway.sources import Batch, Record, SourceError, Src

TIMEOUT_S = 15
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


def _guard_address(host: str) -> None:
    """Refuse link-local (instance metadata) always; private and loopback outside the local stage."""
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        raise SourceError(f"cannot resolve {host}") from None
    for info in infos:
        ip = ipaddress.ip_address(info[4][0])
        if ip.is_link_local or ip.is_multicast or ip.is_unspecified:
            raise SourceError(f"{host} resolves to a forbidden address")
        if (ip.is_private or ip.is_loopback or ip.is_reserved) and not _local():
            raise SourceError(f"{host} resolves to a private address")


def _cfg(src: Src) -> dict[str, Any]:
    return {**DEFAULTS, **src.config}


def _get(cfg: dict[str, Any], params: dict[str, Any]) -> Any:
    split = urllib.parse.urlsplit(cfg["url"])
    _guard_address(split.hostname or "")
    query = urllib.parse.parse_qsl(split.query) + [(k, str(v)) for k, v in params.items() if v is not None]
    url = urllib.parse.urlunsplit(split._replace(query=urllib.parse.urlencode(query)))
    headers = {"Accept": "application/json", "User-Agent": "aiplat-gateway-sync/1"}
    if cfg.get("api_key"):
        headers[cfg["api_key_header"]] = cfg["api_key"]
    req = urllib.request.Request(url, headers=headers, method="GET")
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(req, timeout=TIMEOUT_S) as resp:
            body = resp.read(MAX_PAGE_BYTES + 1)
    except urllib.error.HTTPError as err:
        raise SourceError(f"{split.hostname} answered HTTP {err.code}") from None
    except (urllib.error.URLError, OSError) as err:
        raise SourceError(f"cannot reach {split.hostname} ({type(err).__name__})") from None
    if len(body) > MAX_PAGE_BYTES:
        raise SourceError("a page is larger than 16 MiB")
    try:
        return json.loads(body)
    except ValueError:
        raise SourceError(f"{split.hostname} did not answer JSON") from None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are not followed (they could lead to an address the guard never saw)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def health(src: Src) -> None:
    cfg = _cfg(src)
    page = _get(cfg, {cfg["page_size_param"]: 1})
    if not isinstance(page, dict) or not isinstance(page.get(cfg["items_field"]), list):
        raise SourceError(f"the answer has no '{cfg['items_field']}' list")


def read(src: Src, cursor: dict[str, Any] | None, mode: str) -> Batch:
    cfg = _cfg(src)
    watermark = (cursor or {}).get("watermark") if mode == "INCREMENTAL" else None
    high = watermark
    records: list[Record] = []
    page_cursor = None
    for _ in range(cfg["max_pages"]):
        page = _get(cfg, {cfg["since_param"]: watermark, cfg["page_size_param"]: cfg["page_size"],
                          cfg["cursor_param"]: page_cursor})
        items = page.get(cfg["items_field"]) if isinstance(page, dict) else None
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise SourceError(f"the answer has no '{cfg['items_field']}' list of objects")
        for item in items:
            if item.get(cfg["id_field"]) is None:
                raise SourceError(f"a record has no '{cfg['id_field']}'")
            records.append(Record(str(item[cfg["id_field"]]), item))
            mark = item.get(cfg["updated_field"])
            if mark is not None and (high is None or str(mark) > str(high)):
                high = str(mark)
        page_cursor = page.get(cfg["next_field"])
        if not page_cursor or not items:
            break
    else:
        raise SourceError(f"more than {cfg['max_pages']} pages")
    return Batch(records=records, cursor={"watermark": high}, rows_read=len(records),
                 complete=(mode == "FULL_REFRESH"), primary_key=[cfg["id_field"]])
