"""The append-only, hash-chained audit trail: one chain per workspace, in the workspace's region.

Each event stores ``seq`` (1, 2, ...), ``prev_hash`` (the previous event's ``hash``; 64 zeros for the
first) and ``hash`` = SHA-256 of the canonical JSON of every other field. An event is written with a
conditional put on its ``seq``, so two writers can never both take the same place in the chain; the
loser re-reads the head and tries again; a writer that cannot place its event raises
``AuditAppendFailed`` (and logs an error) instead of returning, so no event is ever dropped silently.
Nothing in the code base updates or deletes an event, and the
deployment template denies ``UpdateItem``/``DeleteItem`` on the table to every function.
``verify_chain`` finds a changed, deleted, inserted or reordered event; truncation and a re-hashed
chain are found against the signed chain-head digests (``chalicelib/platform/audit_digests.py``).
"""
from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import PutError
from pynamodb.indexes import AllProjection, LocalSecondaryIndex

from chalicelib.core import clock, correlation
from chalicelib.core.conditions import condition_failed
from chalicelib.core.ids import new_id
from chalicelib.core.logs import get_logger
from chalicelib.core.models import BaseModel, regional

log = get_logger("audit")

GENESIS = "0" * 64
MAX_APPEND_ATTEMPTS = 50
HASHED_FIELDS = ("id", "workspace_id", "seq", "occurred_at", "actor", "action", "target",
                 "correlation_id", "ip", "user_agent", "details", "prev_hash")


class _ByTime(LocalSecondaryIndex):
    class Meta:
        index_name = "by_time"
        projection = AllProjection()

    workspace_id = UnicodeAttribute(hash_key=True)
    occurred_at = UnicodeAttribute(range_key=True)


class AuditEventAttrs(BaseModel):
    TABLE = "audit_events"
    workspace_id = UnicodeAttribute(hash_key=True)
    seq = NumberAttribute(range_key=True)
    id = UnicodeAttribute()
    occurred_at = UnicodeAttribute()
    actor = UnicodeAttribute()  # canonical JSON
    action = UnicodeAttribute()
    target = UnicodeAttribute()  # canonical JSON
    correlation_id = UnicodeAttribute()
    ip = UnicodeAttribute(null=True)
    user_agent = UnicodeAttribute(null=True)
    details = UnicodeAttribute()  # canonical JSON
    prev_hash = UnicodeAttribute()
    hash = UnicodeAttribute()
    by_time = _ByTime()


class AuditAppendFailed(RuntimeError):
    """The event could not be appended; the action that wanted it recorded must not report success."""


class CallerLike(Protocol):
    ip: str
    user_agent: str
    correlation_id: str


@dataclass(frozen=True)
class Actor:
    type: str  # user | system | support
    id: str
    email: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"type": self.type, "id": self.id, "email": self.email}


SYSTEM = Actor("system", "system")


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def compute_hash(event: dict[str, Any]) -> str:
    payload = {k: event.get(k) for k in HASHED_FIELDS}
    payload["ip"] = payload["ip"] or ""
    payload["user_agent"] = payload["user_agent"] or ""
    return hashlib.sha256(canonical(payload).encode()).hexdigest()


def to_dict(item: Any) -> dict[str, Any]:
    """The public shape of a stored event (actor, target and details as objects)."""
    return {
        "id": item.id,
        "workspace_id": item.workspace_id,
        "seq": int(item.seq),
        "occurred_at": item.occurred_at,
        "actor": json.loads(item.actor),
        "action": item.action,
        "target": json.loads(item.target),
        "correlation_id": item.correlation_id,
        "ip": item.ip or "",
        "user_agent": item.user_agent or "",
        "details": json.loads(item.details),
        "prev_hash": item.prev_hash,
        "hash": item.hash,
    }


def model(region: str) -> type[AuditEventAttrs]:
    return regional(AuditEventAttrs, region)


def head(region: str, workspace_id: str) -> Any | None:
    """The latest event of a workspace's chain, or None."""
    for item in model(region).query(workspace_id, scan_index_forward=False, limit=1, consistent_read=True):
        return item
    return None


def append(
    region: str,
    workspace_id: str,
    action: str,
    *,
    actor: Actor,
    target: dict[str, Any] | None = None,
    details: dict[str, Any] | None = None,
    caller: CallerLike | None = None,
) -> dict[str, Any]:
    """Append one event to the workspace's chain and return it."""
    cls = model(region)
    for attempt in range(MAX_APPEND_ATTEMPTS):
        if attempt:
            time.sleep(random.uniform(0, 0.005 * min(attempt, 10)))  # jittered backoff: writers spread out
        last = head(region, workspace_id)
        now = clock.iso()
        event: dict[str, Any] = {
            "id": new_id("evt"),
            "workspace_id": workspace_id,
            "seq": (int(last.seq) + 1) if last else 1,
            "occurred_at": max(now, last.occurred_at) if last else now,
            "actor": actor.as_dict(),
            "action": action,
            "target": target or {},
            "correlation_id": caller.correlation_id if caller else correlation.current(),
            "ip": caller.ip if caller else "",
            "user_agent": caller.user_agent if caller else "",
            "details": details or {},
            "prev_hash": last.hash if last else GENESIS,
        }
        event["hash"] = compute_hash(event)
        item = cls(
            workspace_id, event["seq"], id=event["id"], occurred_at=event["occurred_at"],
            actor=canonical(event["actor"]), action=action, target=canonical(event["target"]),
            correlation_id=event["correlation_id"], ip=event["ip"] or None,
            user_agent=event["user_agent"] or None, details=canonical(event["details"]),
            prev_hash=event["prev_hash"], hash=event["hash"],
        )
        try:
            item.save(condition=cls.seq.does_not_exist())
            return event
        except PutError as err:
            if not condition_failed(err):
                raise
    log.error("audit append failed", extra={"workspace_id": workspace_id, "action": action,
                                            "attempts": MAX_APPEND_ATTEMPTS})
    raise AuditAppendFailed(f"audit event {action!r} not written after {MAX_APPEND_ATTEMPTS} attempts")


def iter_chain(region: str, workspace_id: str) -> Iterator[dict[str, Any]]:
    for item in model(region).query(workspace_id, consistent_read=True):
        yield to_dict(item)


@dataclass
class Verification:
    ok: bool
    count: int = 0
    head_hash: str = GENESIS
    problems: list[str] = field(default_factory=list)


def verify_chain(events: Iterable[dict[str, Any]], *, expect_genesis: bool = True) -> Verification:
    """Check hashes, links and sequence numbers of events given in chain order.

    With ``expect_genesis`` the first event must be seq 1 linked to the genesis hash (a whole live
    chain); without it the first event's ``prev_hash`` is taken as given (an export of a range).
    """
    result = Verification(ok=True)
    prev_hash: str | None = GENESIS if expect_genesis else None
    prev_seq: int | None = 0 if expect_genesis else None
    for event in events:
        result.count += 1
        seq = event.get("seq")
        if prev_seq is not None and seq != prev_seq + 1:
            result.problems.append(f"event {event.get('id')}: seq {seq} follows {prev_seq} (missing or reordered event)")
        if prev_hash is not None and event.get("prev_hash") != prev_hash:
            result.problems.append(f"event {event.get('id')}: prev_hash does not match the previous event")
        if compute_hash(event) != event.get("hash"):
            result.problems.append(f"event {event.get('id')}: content does not match its hash (changed)")
        prev_hash = event.get("hash")
        prev_seq = seq if isinstance(seq, int) else None
        result.head_hash = str(prev_hash)
    result.ok = not result.problems
    return result


def verify_live(region: str, workspace_id: str) -> Verification:
    return verify_chain(iter_chain(region, workspace_id))
