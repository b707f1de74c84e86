"""Aggregate usage counters (global store): tokens in and out per workspace, model and day."""
from __future__ import annotations

import datetime as dt
import re
from typing import Any

from chalicelib.chat.models import UsageAttrs, usage
from chalicelib.core import clock
from chalicelib.core.authz import Principal
from chalicelib.core.config import settings
from chalicelib.core.http.errors import validation_error
from chalicelib.core.store.transact import Tx

MAX_DAYS = 366
_FULL_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _counter(workspace_id: str, model: str, input_tokens: int, output_tokens: int) -> tuple[Any, list[Any]]:
    day = clock.utcnow().strftime("%Y-%m-%d")
    return usage()(workspace_id, f"{day}#{model}"), [
        UsageAttrs.day.set(day), UsageAttrs.model.set(model), UsageAttrs.input_tokens.add(input_tokens),
        UsageAttrs.output_tokens.add(output_tokens), UsageAttrs.requests.add(1)]


def add(workspace_id: str, model: str, input_tokens: int, output_tokens: int) -> None:
    item, actions = _counter(workspace_id, model, input_tokens, output_tokens)
    item.update(actions=actions)


def add_in(tx: Tx, workspace_id: str, model: str, input_tokens: int, output_tokens: int) -> bool:
    """Count the answer in the answer's own transaction when the counters (global by design) live in
    that region; False when they do not (the caller then counts with ``add``)."""
    if tx.region != settings().global_region:
        return False
    item, actions = _counter(workspace_id, model, input_tokens, output_tokens)
    tx.update(item, actions=actions)
    return True


def _day(value: str) -> dt.date:
    """An RFC 3339 full-date (``YYYY-MM-DD`` only: no week dates, no basic format); ValueError otherwise."""
    if not _FULL_DATE.fullmatch(value):
        raise ValueError(value)
    return dt.date.fromisoformat(value)


def report(principal: Principal, start: str | None, end: str | None) -> dict[str, Any]:
    """``GET /v1/usage``: the workspace's counters between two days (inclusive, ``YYYY-MM-DD``)."""
    today = clock.utcnow().date()
    try:
        to = _day(end) if end is not None else today
        frm = _day(start) if start is not None else to - dt.timedelta(days=29)
    except ValueError:
        raise validation_error([{"field": "from/to", "message": "must be dates (YYYY-MM-DD)"}]) from None
    if frm > to or (to - frm).days >= MAX_DAYS:
        raise validation_error([{"field": "from/to", "message": f"must span 1 to {MAX_DAYS} days, from <= to"}])
    cls = usage()
    items = [{"day": i.day, "model": i.model, "input_tokens": int(i.input_tokens), "output_tokens": int(i.output_tokens),
              "requests": int(i.requests)}
             for i in cls.query(principal.workspace_id, cls.key.between(frm.isoformat(), to.isoformat() + "$"))]
    totals = {"input_tokens": sum(i["input_tokens"] for i in items),
              "output_tokens": sum(i["output_tokens"] for i in items), "requests": sum(i["requests"] for i in items)}
    return {"workspace_id": principal.workspace_id, "from": frm.isoformat(), "to": to.isoformat(), "items": items,
            "totals": totals}
