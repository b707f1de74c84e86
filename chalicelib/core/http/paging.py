"""Opaque cursors for list endpoints (``limit`` + ``after``; answers carry ``has_more`` and
``next_cursor``). A cursor is base64url JSON naming its list kind, so one list's cursor is refused by
another; anything that does not decode is a 400. An empty ``after`` (``?after=`` from a template whose
cursor is still unset) means the first page, like no ``after`` at all."""
from __future__ import annotations

import base64
import json
from typing import Any

from chalicelib.core.http.errors import validation_error
from chalicelib.core.http.validation import query_int

DEFAULT_LIMIT = 50
MAX_LIMIT = 200


def encode(kind: str, value: Any) -> str:
    raw = json.dumps({"k": kind, "v": value}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(kind: str, cursor: str | None, typ: type = str) -> Any:
    """The position stored in ``cursor`` (None when absent or empty); 400 when it is not one of ``kind``."""
    if not cursor and isinstance(cursor, str | None):
        return None
    try:
        if len(cursor) > 512:
            raise ValueError
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(data, dict) or data.get("k") != kind or type(data.get("v")) is not typ:
            raise ValueError
        return data["v"]
    except (ValueError, TypeError, UnicodeDecodeError):
        raise validation_error([{"field": "after", "message": "is not a cursor of this list"}]) from None


def limit(query: dict[str, str], default: int = DEFAULT_LIMIT, maximum: int = MAX_LIMIT) -> int:
    return query_int(query, "limit", default, minimum=1, maximum=maximum)


def check_params(query: dict[str, str], allowed: tuple[str, ...]) -> None:
    """Unknown query parameters are refused like unknown body fields."""
    unknown = [k for k in query if k not in allowed]
    if unknown:
        raise validation_error([{"field": k[:64], "message": "is not a known query parameter"} for k in unknown])


def page(items: list[Any], lim: int, kind: str, key: Any) -> dict[str, Any]:
    """``items`` holds up to ``lim + 1`` entries; the extra one only tells that more exist."""
    has_more = len(items) > lim
    shown = items[:lim]
    return {"has_more": has_more, "next_cursor": encode(kind, key(shown[-1])) if has_more and shown else None,
            "_items": shown}


def page_sorted(items: list[Any], query: dict[str, str], kind: str, key: Any) -> dict[str, Any]:
    """One page of a list already sorted by ``key`` (a JSON-able, comparable value per item), from the
    ``limit`` and ``after`` of ``query``; the cursor holds the last key shown."""
    lim = limit(query)
    after = decode(kind, query.get("after"), list)
    chosen = [i for i in items if after is None or key(i) > after][: lim + 1]
    return page(chosen, lim, kind, key)
