"""Reading the audit trail: ``GET /v1/audit/events`` with time, action and actor filters and cursor
paging that costs the same on every page.

Events of a workspace are keyed by ``seq`` (the chain position) and ``occurred_at`` never decreases
along the chain, so a time range is a ``seq`` range: ``from``/``to`` are turned into ``seq`` bounds with
one ``by_time`` index lookup each, and a page is one key-condition Query ``seq > cursor`` -- a seek,
whatever the page number. ``action``/``actor`` are server-side filter expressions; a request reads at
most ``MAX_SCANNED`` events and, when a sparse filter needs more, returns what it found with a cursor
to continue (``has_more`` true).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from chalicelib.core import audit
from chalicelib.core.http import paging
from chalicelib.core.http.errors import validation_error

PARAMS = ("from", "to", "action", "actor", "limit", "after", "order")
ORDERS = ("oldest", "newest")  # chain order (the default), or newest first
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_SCANNED = 5000
_ACTION_RE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*(\.\*)?$")
_ACTOR_RE = re.compile(r"^[A-Za-z0-9_.+@-]{1,254}$")


@dataclass(frozen=True)
class Filters:
    from_iso: str | None = None
    to_iso: str | None = None
    action: str | None = None
    actor: str | None = None


def _time(query: dict[str, str], name: str) -> str | None:
    raw = query.get(name)
    if raw is None:
        return None
    try:
        return _instant(raw).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    except (ValueError, OverflowError):
        raise validation_error([{"field": name, "message": "must be an RFC 3339 date-time with an offset, "
                                                          "e.g. 2026-01-31T09:00:00Z"}]) from None


def _instant(raw: str) -> datetime:
    """An RFC 3339 date-time with any offset (``Z``, ``+02:00``), as UTC; instants past the calendar's
    ends are clamped to them (no event is that old or that new)."""
    if "T" not in raw.upper():
        raise ValueError("not a date-time")
    dt = datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00").replace("t", "T"))
    if dt.tzinfo is None:
        raise ValueError("no offset")
    try:
        return dt.astimezone(UTC)
    except OverflowError:
        return (datetime.max if dt.year == datetime.max.year else datetime.min).replace(tzinfo=UTC)


def parse_filters(query: dict[str, str], allowed: tuple[str, ...] = PARAMS) -> Filters:
    paging.check_params(query, allowed)
    f = Filters(from_iso=_time(query, "from"), to_iso=_time(query, "to"), action=query.get("action"),
                actor=query.get("actor"))
    errors = []
    if f.from_iso and f.to_iso and f.to_iso <= f.from_iso:
        errors.append({"field": "to", "message": "must be later than from"})
    if f.action is not None and not _ACTION_RE.fullmatch(f.action):
        errors.append({"field": "action", "message": "must be an action such as member.removed or a prefix such as member.*"})
    if f.actor is not None and not _ACTOR_RE.fullmatch(f.actor):
        errors.append({"field": "actor", "message": "must be an actor id (usr_...) or e-mail address"})
    if errors:
        raise validation_error(errors)
    return f


def seq_bounds(region: str, workspace_id: str, f: Filters) -> tuple[int, int] | None:
    """The ``seq`` range holding ``[from, to)``, or None when it is empty."""
    cls = audit.model(region)
    lo, hi = 1, 2**53
    if f.from_iso:
        first = next(iter(cls.by_time.query(workspace_id, cls.occurred_at >= f.from_iso, limit=1)), None)
        if first is None:
            return None
        lo = int(first.seq)
    if f.to_iso:
        last = next(iter(cls.by_time.query(workspace_id, cls.occurred_at < f.to_iso, scan_index_forward=False,
                                           limit=1)), None)
        if last is None:
            return None
        hi = int(last.seq)
    return (lo, hi) if lo <= hi else None


def _actor_ids(region: str, workspace_id: str, email: str) -> set[str]:
    """The actor ids an address stood for: v1 events hold it in the actor, v2 events in ``audit_personal``
    (an erased person's address finds nothing)."""
    per = audit.personal_model(region)
    return {r.subject for r in per.query(workspace_id, filter_condition=per.email == email.lower(),
                                         consistent_read=True) if r.subject and r.ref.endswith("#actor")}


def _filter(cls: Any, f: Filters, region: str = "", workspace_id: str = "") -> Any:
    cond = None
    if f.action:
        c = cls.action.startswith(f.action[:-1]) if f.action.endswith(".*") else cls.action == f.action
        cond = c
    if f.actor:
        if "@" in f.actor:
            c = cls.actor.contains(f'"email":"{f.actor.lower()}"')
            for actor_id in sorted(_actor_ids(region, workspace_id, f.actor)):
                c = c | (cls.actor.contains(f'"id":"{actor_id}"') & cls.v.exists())
        else:
            c = cls.actor.contains(f'"id":"{f.actor}"')
        cond = c if cond is None else cond & c
    return cond


def order_of(query: dict[str, str]) -> bool:
    """True for ``order=newest`` (newest first); chain order otherwise."""
    order = query.get("order", "oldest")
    if order not in ORDERS:
        raise validation_error([{"field": "order", "message": "must be oldest or newest"}])
    return order == "newest"


def query_events(region: str, workspace_id: str, f: Filters, limit: int, after: int | None,
                 newest: bool = False) -> dict[str, Any]:
    """One page of events in chain (= time) order, or newest first (``after`` then means "older than")."""
    empty = {"events": [], "has_more": False, "next_cursor": None}
    bounds = seq_bounds(region, workspace_id, f)
    if bounds is None:
        return empty
    lo, hi = bounds
    if after is not None and newest:
        hi = min(hi, after - 1)
    elif after is not None:
        lo = max(lo, after + 1)
    if lo > hi:
        return empty
    cls = audit.model(region)
    cond = _filter(cls, f, region, workspace_id)
    size = limit + 1 if cond is None else min(MAX_SCANNED, max(limit + 1, 500))
    pages = cls.query(workspace_id, cls.seq.between(lo, hi), filter_condition=cond, page_size=size,
                      scan_index_forward=not newest).page_iter
    found: list[Any] = []
    scanned = 0
    resume: int | None = None
    for page in pages:
        for raw in page.get("Items", []):
            found.append(cls.from_raw_data(raw))
            if len(found) > limit:
                break
        scanned += int(page.get("ScannedCount", 0))
        if len(found) > limit:
            break
        lek = page.get("LastEvaluatedKey")
        if lek and scanned >= MAX_SCANNED:
            resume = int(lek["seq"]["N"])
            break
    if len(found) > limit:
        shown = found[:limit]
        return {"events": audit.reveal(region, [audit.to_dict(e) for e in shown]), "has_more": True,
                "next_cursor": paging.encode("audit", int(shown[-1].seq))}
    if resume is not None:
        return {"events": audit.reveal(region, [audit.to_dict(e) for e in found]), "has_more": True,
                "next_cursor": paging.encode("audit", resume)}
    return {"events": audit.reveal(region, [audit.to_dict(e) for e in found]), "has_more": False, "next_cursor": None}


def decode_after(query: dict[str, str]) -> int | None:
    value = paging.decode("audit", query.get("after"), int)
    if value is not None and value < 0:
        raise validation_error([{"field": "after", "message": "is not a cursor of this list"}])
    return value
