"""The append-only, hash-chained audit trail: one chain per workspace, in the workspace's region.

Each event stores ``seq`` (1, 2, ...), ``prev_hash`` (the previous event's ``hash``; 64 zeros for the
first) and ``hash`` = SHA-256 of the canonical JSON of every other field. An event is written with a
conditional put on its ``seq``, so two writers can never both take the same place in the chain; the
loser re-reads the head and tries again; a writer that cannot place its event raises
``AuditAppendFailed`` (and logs an error) instead of returning, so no event is ever dropped silently.
Nothing in the code base updates or deletes an event, and the
deployment template denies ``UpdateItem``/``DeleteItem`` on the table to every function.
``verify_chain`` finds a changed, deleted, inserted or reordered event; truncation and a re-hashed
chain are found against the signed chain-head digests (``chalicelib/platform/audit/digests.py``).

Hash versions. Version 1 (events without ``v``) hashes every field, personal ones included. Version 2
(every event written now, ``v: 2``) keeps personal values out of the hashed content so that erasing a
person never breaks a chain: the actor's e-mail, the caller's IP and user agent, and the target's e-mail
are stored in the regional ``audit_personal`` table, one record per role (``actor``, ``target``) with a
random 32-byte nonce; the event hashes ``personal`` = {role: SHA-256(nonce || canonical(values))}
instead. Reading an event merges the record back when its commitment matches; erasure deletes the
records (``residency/erasure.py``), after which the event shows ``erased: true`` and the stable pseudonym
``pseudonym(actor id)``, and ``verify_chain`` still passes because the hashed content never changed.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import PutError
from pynamodb.indexes import AllProjection, LocalSecondaryIndex

from chalicelib.core import clock, correlation
from chalicelib.core.ids import new_id
from chalicelib.core.logs import get_logger
from chalicelib.core.store.conditions import condition_failed
from chalicelib.core.store.tables import BaseModel, regional

log = get_logger("audit")

GENESIS = "0" * 64
MAX_APPEND_ATTEMPTS = 50
HASHED_FIELDS = ("id", "workspace_id", "seq", "occurred_at", "actor", "action", "target",
                 "correlation_id", "ip", "user_agent", "details", "prev_hash")
VERSION = 2
PERSONAL_ROLES = ("actor", "target")


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
    v = NumberAttribute(null=True)  # hash version; absent: 1
    personal = UnicodeAttribute(null=True)  # v2: canonical JSON {role: commitment}
    by_time = _ByTime()


class AuditPersonalAttrs(BaseModel):
    """The personal values of one role of one v2 event, outside the hashed chain; erasure deletes it."""

    TABLE = "audit_personal"
    workspace_id = UnicodeAttribute(hash_key=True)
    ref = UnicodeAttribute(range_key=True)  # <seq, 12 digits>#<role>
    subject = UnicodeAttribute(null=True)  # the user the values belong to, when known
    email = UnicodeAttribute(null=True)  # lower-cased, to find an invitee's records
    nonce = UnicodeAttribute()  # hex
    values = UnicodeAttribute()  # canonical JSON


class AuditAppendFailed(RuntimeError):
    """The event could not be appended; the action that wanted it recorded must not report success."""


class PrincipalLike(Protocol):
    @property
    def user_id(self) -> str: ...

    @property
    def email(self) -> str: ...


class CallerLike(Protocol):
    @property
    def ip(self) -> str: ...

    @property
    def user_agent(self) -> str: ...

    @property
    def correlation_id(self) -> str: ...


@dataclass(frozen=True)
class Actor:
    type: str  # user | system | support
    id: str
    email: str = ""

    @classmethod
    def of(cls, principal: PrincipalLike) -> Actor:
        """The user acting through a verified token (``core.authz.Principal``)."""
        return cls("user", principal.user_id, principal.email)

    def as_dict(self) -> dict[str, str]:
        return {"type": self.type, "id": self.id, "email": self.email}


SYSTEM = Actor("system", "system")


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def pseudonym(user_id: str) -> str:
    """The stable pseudonym an erased actor is shown under (derived from the opaque id, never from
    personal data)."""
    return "psn_" + hashlib.sha256(f"aiplat/audit-pseudonym/v1/{user_id}".encode()).hexdigest()[:20]


def commitment(nonce: str, values: dict[str, Any]) -> str:
    return hashlib.sha256(bytes.fromhex(nonce) + canonical(values).encode()).hexdigest()


def split_personal(event: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """(the hashed form of a v2 event, {role: personal values}); works on a merged or a stored event."""
    hashed = dict(event)
    actor = dict(event.get("actor") or {})
    target = dict(event.get("target") or {})
    personal: dict[str, dict[str, Any]] = {}
    actor_values = {"email": actor.pop("email", "") or "", "ip": event.get("ip") or "",
                    "user_agent": event.get("user_agent") or ""}
    actor.pop("pseudonym", None)
    if any(actor_values.values()):
        personal["actor"] = actor_values
    if target.get("email"):
        personal["target"] = {"email": target.pop("email")}
    else:
        target.pop("email", None)
    hashed.update(actor=actor, target=target, ip="", user_agent="")
    hashed.pop("erased", None)
    return hashed, personal


def compute_hash(event: dict[str, Any]) -> str:
    if (event.get("v") or 1) >= 2:
        hashed, _ = split_personal(event)
        payload = {k: hashed.get(k) for k in HASHED_FIELDS}
        payload["v"] = int(event["v"])
        payload["personal"] = event.get("personal") or {}
    else:
        payload = {k: event.get(k) for k in HASHED_FIELDS}
    payload["ip"] = payload["ip"] or ""
    payload["user_agent"] = payload["user_agent"] or ""
    return hashlib.sha256(canonical(payload).encode()).hexdigest()


def personal_model(region: str) -> type[AuditPersonalAttrs]:
    return regional(AuditPersonalAttrs, region)


def personal_ref(seq: int, role: str) -> str:
    return f"{int(seq):012d}#{role}"


def reveal(region: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge the personal values of v2 events back in (when the record exists and matches its
    commitment); an event whose records were erased shows ``erased: true`` and the actor's pseudonym."""
    wanted = [e for e in events if (e.get("v") or 1) >= 2 and e.get("personal")]
    if not wanted:
        return events
    ws = wanted[0]["workspace_id"]
    lo, hi = min(e["seq"] for e in wanted), max(e["seq"] for e in wanted)
    cls = personal_model(region)
    found = {r.ref: r for r in cls.query(ws, cls.ref.between(personal_ref(lo, ""), personal_ref(hi, "~")),
                                         consistent_read=True)}
    for event in wanted:
        for role, committed in (event.get("personal") or {}).items():
            record = found.get(personal_ref(event["seq"], role))
            values = json.loads(record.values) if record is not None else None
            if record is None or values is None or commitment(record.nonce, values) != committed:
                event["erased"] = True
                if role == "actor":
                    event["actor"]["pseudonym"] = pseudonym(str(event["actor"].get("id", "")))
                continue
            if role == "actor":
                event["actor"]["email"] = values.get("email", "")
                event["ip"], event["user_agent"] = values.get("ip", ""), values.get("user_agent", "")
            else:
                event["target"]["email"] = values.get("email", "")
    return events


def to_dict(item: Any) -> dict[str, Any]:
    """The stored shape of an event (actor, target and details as objects); for a v2 event without its
    personal values (``reveal`` adds them)."""
    out = {
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
    if item.v:
        out["v"] = int(item.v)
        out["personal"] = json.loads(item.personal or "{}")
    return out


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
        hashed, personal = split_personal(event)
        nonces = {role: os.urandom(32).hex() for role in personal}
        hashed["v"] = VERSION
        hashed["personal"] = {role: commitment(nonces[role], values) for role, values in personal.items()}
        event["v"], event["personal"] = VERSION, hashed["personal"]
        event["hash"] = hashed["hash"] = compute_hash(hashed)
        item = cls(
            workspace_id, event["seq"], id=event["id"], occurred_at=event["occurred_at"],
            actor=canonical(hashed["actor"]), action=action, target=canonical(hashed["target"]),
            correlation_id=event["correlation_id"], ip=None, user_agent=None, details=canonical(event["details"]),
            prev_hash=event["prev_hash"], hash=event["hash"], v=VERSION, personal=canonical(hashed["personal"]),
        )
        try:
            item.save(condition=cls.seq.does_not_exist())
        except PutError as err:
            if not condition_failed(err):
                raise
            continue
        _save_personal(region, workspace_id, event, personal, nonces)
        return event
    log.error("audit append failed", extra={"workspace_id": workspace_id, "action": action,
                                            "attempts": MAX_APPEND_ATTEMPTS})
    raise AuditAppendFailed(f"audit event {action!r} not written after {MAX_APPEND_ATTEMPTS} attempts")


def _save_personal(region: str, workspace_id: str, event: dict[str, Any], personal: dict[str, dict[str, Any]],
                   nonces: dict[str, str]) -> None:
    """The personal records of a just-written event. Written after the event (its seq is only known
    then); a crash in between leaves the event showing its pseudonym, never a broken chain."""
    target = event.get("target") or {}
    subjects = {"actor": event["actor"].get("id") if event["actor"].get("type") in ("user", "support") else None,
                "target": target.get("id") if target.get("type") == "user" else None}
    cls = personal_model(region)
    for role, values in personal.items():
        email = (values.get("email") or "").lower() or None
        cls(workspace_id, personal_ref(event["seq"], role), subject=subjects.get(role) or None, email=email,
            nonce=nonces[role], values=canonical(values)).save()


def iter_chain(region: str, workspace_id: str, *, personal: bool = True, page: int = 500) -> Iterator[dict[str, Any]]:
    """The workspace's events in chain order, with their personal values merged in (``reveal``)."""
    batch: list[dict[str, Any]] = []
    for item in model(region).query(workspace_id, consistent_read=True):
        batch.append(to_dict(item))
        if len(batch) >= page:
            yield from (reveal(region, batch) if personal else batch)
            batch = []
    yield from (reveal(region, batch) if personal else batch)


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
