"""Account lockout: ten failed sign-in attempts lock the account for 15 minutes.

The counter lives in one ``auth_state`` item per user (``lock#<user_id>``) and is only changed by
conditional ``UpdateItem`` calls, so it is exact under any concurrency:

* before a password (or a second-factor code) is evaluated, the caller *reserves* an attempt
  (``reserve``). The reservation increments ``attempts`` only while the account is not locked and
  fewer than nine attempts are outstanding; the tenth reservation sets ``locked_until`` in the same
  write. When no reservation is granted, nothing is evaluated. So however many requests arrive at
  once, at most ten evaluations happen before the lock.
* a reservation whose evaluation failed stays counted (it *is* the failed attempt); one that
  succeeded is released (``release``); a completed sign-in clears the counter (``clear``).
* a lock ends by itself when ``locked_until`` has passed (the next reservation resets the counter)
  or immediately by an Admin (``unlock``).

Repeated lockouts: every lock whose tenth attempt really failed is recorded (``lockout_times``); the
third lock within 24 hours, and every further one in that window, writes ``security.repeated_lockout``
to the audit trail of every workspace the user belongs to.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pynamodb.exceptions import DoesNotExist, UpdateError

from chalicelib.core import audit, clock
from chalicelib.core.store.conditions import condition_failed
from chalicelib.core.store.tables import global_model
from chalicelib.core.tenancy import workspaces_of
from chalicelib.identity.models import LOCK, LockAttrs, state_key
from chalicelib.identity.users import get_user

MAX_FAILURES = 10
LOCK_SECONDS = 15 * 60
REPEATED_WINDOW_SECONDS = 24 * 3600
REPEATED_THRESHOLD = 3
MAX_RACE_RETRIES = 100


@dataclass(frozen=True)
class Reservation:
    """One granted attempt; ``locks`` when it is the tenth (the account is locked while it runs)."""

    user_id: str
    locks: bool
    locked_until: float | None = None


def _model() -> type[LockAttrs]:
    return global_model(LockAttrs)


def _pk(user_id: str) -> str:
    return state_key(LOCK, user_id)


def _read(user_id: str) -> LockAttrs | None:
    try:
        return _model().get(_pk(user_id), consistent_read=True)
    except DoesNotExist:
        return None


def reserve(user_id: str) -> Reservation | None:
    """Reserve one attempt atomically; None when the account is locked (then evaluate nothing)."""
    cls = _model()
    for _ in range(MAX_RACE_RETRIES):
        try:
            cls(_pk(user_id)).update(
                actions=[cls.attempts.set((cls.attempts | 0) + 1)],
                condition=cls.locked_until.does_not_exist()
                & (cls.attempts.does_not_exist() | (cls.attempts < MAX_FAILURES - 1)),
            )
            return Reservation(user_id, locks=False)
        except UpdateError as err:
            if not condition_failed(err):
                raise
        item = _read(user_id)
        now = clock.now()
        if item is None:
            continue
        if item.locked_until is not None:
            if item.locked_until > now:
                return None
            _expire(user_id, item.locked_until)
            continue
        n = int(item.attempts or 0)
        if n < MAX_FAILURES - 1:
            continue  # lost a race with a release; try again
        until = now + LOCK_SECONDS
        try:
            cls(_pk(user_id)).update(
                actions=[cls.attempts.set(n + 1), cls.locked_until.set(until)],
                condition=cls.locked_until.does_not_exist() & (cls.attempts == n),
            )
            return Reservation(user_id, locks=True, locked_until=until)
        except UpdateError as err:
            if not condition_failed(err):
                raise
    return None  # pathological contention: refuse rather than evaluate unbounded


def _expire(user_id: str, locked_until: float) -> None:
    """End an elapsed lock (only the one we saw, so a fresh lock is never undone)."""
    cls = _model()
    try:
        cls(_pk(user_id)).update(actions=[cls.attempts.set(0), cls.locked_until.remove()],
                                 condition=cls.locked_until == locked_until)
    except UpdateError as err:
        if not condition_failed(err):
            raise


def release(reservation: Reservation) -> None:
    """The reserved attempt succeeded: it does not count as a failure."""
    cls = _model()
    actions: list[Any] = [cls.attempts.set((cls.attempts | 1) - 1)]
    condition = cls.attempts > 0
    if reservation.locks:
        actions.append(cls.locked_until.remove())
        condition = condition & (cls.locked_until == reservation.locked_until)
    try:
        cls(_pk(reservation.user_id)).update(actions=actions, condition=condition)
    except UpdateError as err:
        if not condition_failed(err):
            raise


def failed(reservation: Reservation, *, caller: Any = None) -> None:
    """The reserved attempt failed. When it was the tenth, record the lockout (and maybe alert)."""
    if not reservation.locks:
        return
    cls = _model()
    now = clock.now()
    item = cls(_pk(reservation.user_id))
    item.update(actions=[cls.lockout_times.add({round(now, 3)})])
    times = sorted(item.lockout_times or ())
    old = {t for t in times if t <= now - REPEATED_WINDOW_SECONDS}
    if old:
        item.update(actions=[cls.lockout_times.delete(old)])
    recent = [t for t in times if t > now - REPEATED_WINDOW_SECONDS]
    if len(recent) >= REPEATED_THRESHOLD:
        _repeated_lockout_event(reservation.user_id, len(recent), caller)


def _repeated_lockout_event(user_id: str, count: int, caller: Any) -> None:

    user = get_user(user_id)
    for ws in workspaces_of(user_id):
        audit.append(ws["region"], ws["workspace_id"], "security.repeated_lockout", actor=audit.SYSTEM,
                     target={"type": "user", "id": user_id, "email": user.email if user else ""},
                     details={"lockouts_in_window": count, "window": "PT24H",
                              "lock_duration": f"PT{LOCK_SECONDS // 60}M"},
                     caller=caller)


def clear(user_id: str) -> None:
    """A sign-in completed: forget the failures (lockout history is kept)."""
    cls = _model()
    try:
        cls(_pk(user_id)).update(actions=[cls.attempts.set(0)], condition=cls.locked_until.does_not_exist())
    except UpdateError as err:
        if not condition_failed(err):
            raise


def unlock(user_id: str) -> bool:
    """Admin unlock: clear the lock and the counter now. Returns whether the account was locked."""
    cls = _model()
    was = is_locked(user_id)
    cls(_pk(user_id)).update(actions=[cls.attempts.set(0), cls.locked_until.remove()])
    return was


def is_locked(user_id: str) -> bool:
    item = _read(user_id)
    return bool(item and item.locked_until is not None and item.locked_until > clock.now())


def status(user_id: str) -> dict[str, Any]:
    item = _read(user_id)
    locked = bool(item and item.locked_until is not None and item.locked_until > clock.now())
    return {"locked": locked,
            "locked_until": clock.iso(item.locked_until) if locked and item and item.locked_until else None,
            "failed_attempts": int(item.attempts or 0) if item else 0}
