"""``Idempotency-Key`` on POSTs that start work: one effect per key and caller, even under concurrency.

A record is keyed by the caller (``user_id``) and ``<scope>#<key>``, where the scope names the workspace
(or ``account`` for user-level routes) and the route; another user's same key is another record. The
record is **claimed before the work** with a conditional put (state ``in_progress``, a random claim
token, the SHA-256 fingerprint of the request). Then:

- a concurrent duplicate with the same fingerprint waits up to ``WAIT_S`` for the first call to finish
  and replays it, or gets ``409 request_in_progress`` (with ``Retry-After``); it never does the work;
- the same key with another request is ``409 idempotency_key_reused``;
- the work marks the record ``done`` **in the same transaction as its effect and audit event**
  (``complete_in``, conditioned on the claim token), so the record never says ``done`` without the
  effect, nor is the effect ever committed by a call that lost its claim;
- the record keeps only a reference to what the work made (``{"type", "id"}``), never the answer:
  a replay re-reads the resource (``replay``), so no personal data is copied here, and a resource
  deleted since replays as its 404;
- a call whose work fails (a 4xx or a crash it survives) releases its claim; a claim whose holder died
  can be taken over after ``CLAIM_S`` (the taker's work is fenced: the dead holder's commit would fail).

Records live in the region of the resource and expire after 24 hours; erasure deletes a user's records
(``erase``).
"""
from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import DeleteError, DoesNotExist, PutError, UpdateError

from chalicelib.core import clock
from chalicelib.core.http.errors import ApiError
from chalicelib.core.logs import get_logger
from chalicelib.core.store.conditions import condition_failed
from chalicelib.core.store.tables import BaseModel, regional
from chalicelib.core.store.transact import Refused, Tx

log = get_logger("idempotency")
TTL_SECONDS = 24 * 3600
HEADER = "Idempotency-Key"
CLAIM_S = 120  # a claim older than this, still in progress, is taken to be its holder's death
WAIT_S = 2.0  # how long a concurrent duplicate waits for the first call before answering 409
POLL_S = 0.05
IN_PROGRESS, DONE = "in_progress", "done"
ACCOUNT = "account"  # scope prefix of user-level routes (no workspace yet)
_PRINTABLE = range(0x20, 0x7F)  # what an HTTP header carries portably


class IdempotencyAttrs(BaseModel):
    TABLE = "idempotency"
    user_id = UnicodeAttribute(hash_key=True)  # the caller: keys are scoped by user
    key = UnicodeAttribute(range_key=True)  # <workspace_id | account>#<route scope>#<Idempotency-Key>
    request_hash = UnicodeAttribute()  # SHA-256 of the canonical request
    state = UnicodeAttribute()  # in_progress | done
    token = UnicodeAttribute()  # the claim holder's random token
    claimed_until = NumberAttribute()  # epoch seconds
    ref = UnicodeAttribute(null=True)  # JSON {type, id, ...}: what the first call made (ids only)
    expires_at = NumberAttribute()  # TTL


@dataclass
class Claim:
    region: str
    user_id: str
    key: str
    token: str
    completed: bool = False


_current: ContextVar[Claim | None] = ContextVar("idempotency_claim", default=None)


def model(region: str) -> type[IdempotencyAttrs]:
    return regional(IdempotencyAttrs, region)


def _region(cls: type[IdempotencyAttrs]) -> str:
    return str(cls.Meta.region)


def _validate_key(key: str) -> None:
    if not 1 <= len(key) <= 255 or any(ord(ch) not in _PRINTABLE for ch in key):
        raise ApiError(400, "invalid_idempotency_key", "Idempotency-Key must be 1 to 255 printable ASCII characters.")


def fingerprint(request: Any) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).hexdigest()


def _in_progress() -> ApiError:
    return ApiError(409, "request_in_progress", "A request with this Idempotency-Key is still in progress; retry "
                    "after it finishes to get its answer.", headers={"Retry-After": "1"})


def _reused() -> ApiError:
    return ApiError(409, "idempotency_key_reused", "This Idempotency-Key was already used with a different request.")


def complete_in(tx: Tx, ref: dict[str, Any]) -> None:
    """Add "this request is done, it made ``ref``" to the effect's transaction, when the current request
    holds a claim in the transaction's region (a no-op otherwise)."""
    claim = _current.get()
    if claim is None or claim.region != tx.region:
        return
    cls = model(claim.region)
    tx.update(cls(claim.user_id, claim.key),
              actions=[cls.state.set(DONE), cls.ref.set(json.dumps(ref, sort_keys=True))],
              condition=(cls.token == claim.token) & (cls.state == IN_PROGRESS), tag="idempotency")
    claim.completed = True


def _claim(cls: type[IdempotencyAttrs], user_id: str, key: str, digest: str) -> tuple[Claim | None, Any]:
    """Try to claim; ``(claim, None)`` or ``(None, the existing record)``."""
    now = int(clock.now())
    token = secrets.token_hex(16)
    item = cls(user_id, key, request_hash=digest, state=IN_PROGRESS, token=token, claimed_until=now + CLAIM_S,
               expires_at=now + TTL_SECONDS)
    try:
        item.save(condition=cls.user_id.does_not_exist() | (cls.expires_at < now))
        return Claim(_region(cls), user_id, key, token), None
    except PutError as err:
        if not condition_failed(err):
            raise
    return None, _read(cls, user_id, key)


def _read(cls: type[IdempotencyAttrs], user_id: str, key: str) -> IdempotencyAttrs | None:
    try:
        return cls.get(user_id, key, consistent_read=True)
    except DoesNotExist:
        return None


def _take_over(cls: type[IdempotencyAttrs], prior: IdempotencyAttrs) -> Claim | None:
    """Claim a record whose holder stopped without finishing (its claim expired)."""
    now = int(clock.now())
    token = secrets.token_hex(16)
    try:
        prior.update(actions=[cls.token.set(token), cls.claimed_until.set(now + CLAIM_S)],
                     condition=(cls.token == prior.token) & (cls.state == IN_PROGRESS))
    except UpdateError:
        return None
    return Claim(_region(cls), prior.user_id, prior.key, token)


def _release(cls: type[IdempotencyAttrs], claim: Claim) -> None:
    try:
        cls(claim.user_id, claim.key).delete(condition=(cls.token == claim.token) & (cls.state == IN_PROGRESS))
    except DeleteError:
        pass


def _finish(cls: type[IdempotencyAttrs], claim: Claim, ref: dict[str, Any]) -> None:
    """Mark done after work that committed no transaction here (e.g. its effect is in another region)."""
    try:
        cls(claim.user_id, claim.key).update(
            actions=[cls.state.set(DONE), cls.ref.set(json.dumps(ref, sort_keys=True))],
            condition=(cls.token == claim.token) & (cls.state == IN_PROGRESS))
    except UpdateError:
        log.warning("idempotency claim lost before it was marked done", extra={"key": claim.key})


def _acquire(region: str, user_id: str, scope: str, key: str, request: Any,
             replay: Callable[[dict[str, Any]], tuple[int, Any]]) -> tuple[Any, Claim | None, tuple[int, Any] | None]:
    """``(table, claim, None)`` once this call holds the key, or ``(table, None, replayed answer)``."""
    _validate_key(key)
    digest = fingerprint(request)
    cls = model(region)
    record_key = f"{scope}#{key}"
    waited_until = time.monotonic() + WAIT_S
    claim, prior = _claim(cls, user_id, record_key, digest)
    while claim is None:
        if prior is None:  # released meanwhile: try to claim it again
            claim, prior = _claim(cls, user_id, record_key, digest)
            continue
        if prior.request_hash != digest:
            raise _reused()
        if prior.state == DONE and prior.ref:
            return cls, None, replay(json.loads(prior.ref))
        if int(prior.claimed_until) < clock.now():
            claim = _take_over(cls, prior)
            if claim is not None:
                break
        if time.monotonic() >= waited_until:
            raise _in_progress()
        time.sleep(POLL_S)
        prior = _read(cls, user_id, record_key)
    return cls, claim, None


def run(region: str, user_id: str, scope: str, key: str | None, request: Any,
        work: Callable[[], tuple[int, Any]], *, ref_of: Callable[[Any], dict[str, Any]],
        replay: Callable[[dict[str, Any]], tuple[int, Any]]) -> tuple[int, Any, bool]:
    """Run ``work`` once per (caller, scope, key); returns ``(status, body, replayed)``.

    ``request`` identifies the call (body and path parameters); ``ref_of(body)`` is the reference the
    record keeps; ``replay(ref)`` answers a replay by re-reading the resource.
    """
    if key is None:
        status, body = work()
        return status, body, False
    cls, claim, replayed = _acquire(region, user_id, scope, key, request, replay)
    if claim is None:
        assert replayed is not None
        return replayed[0], replayed[1], True
    reset = _current.set(claim)
    try:
        status, body = work()
    except Refused as refused:
        _release(cls, claim)
        if "idempotency" in refused.tags:
            raise _in_progress() from None
        raise
    except BaseException:
        _release(cls, claim)
        raise
    finally:
        _current.reset(reset)
    if not claim.completed:
        _finish(cls, claim, ref_of(body))
    return status, body, False


@dataclass
class Hold:
    """A claimed key whose work happens later, in steps (an answer streamed while it is generated): the
    work's commit runs inside ``committing`` (so ``complete_in`` joins its transaction); ``release``
    gives the key back when the work ends without a commit. Without a key every call is a no-op."""
    cls: Any = None
    claim: Claim | None = None
    replayed: tuple[int, Any] | None = None
    ended: bool = False

    @contextmanager
    def committing(self, ref_of: Callable[[Any], dict[str, Any]]) -> Iterator[list[Any]]:
        """Around the commit: the block appends what it made to the yielded list (for ``ref_of``)."""
        made: list[Any] = []
        if self.claim is None:
            yield made
            return
        reset = _current.set(self.claim)
        try:
            yield made
        except Refused as refused:
            self.release()
            if "idempotency" in refused.tags:
                raise _in_progress() from None
            raise
        except BaseException:
            self.release()
            raise
        finally:
            _current.reset(reset)
        if not self.claim.completed and made:
            _finish(self.cls, self.claim, ref_of(made[-1]))
        self.ended = True

    def release(self) -> None:
        if self.claim is not None and not self.ended:
            _release(self.cls, self.claim)
        self.ended = True


def hold(region: str, user_id: str, scope: str, key: str | None, request: Any,
         replay: Callable[[dict[str, Any]], tuple[int, Any]]) -> Hold:
    """Claim the key before a stepped work starts; ``Hold.replayed`` is set when an earlier call with the
    key already finished (its answer, re-read), and the work must not run."""
    if key is None:
        return Hold()
    cls, claim, replayed = _acquire(region, user_id, scope, key, request, replay)
    return Hold(cls, claim, replayed)


def erase(region: str, user_id: str, prefix: str | None = None) -> int:
    """Delete the user's records in ``region`` (those whose key starts with ``prefix``, when given)."""
    cls = model(region)
    cond = cls.key.startswith(prefix) if prefix else None
    n = 0
    for item in cls.query(user_id, cond, consistent_read=True):
        item.delete()
        n += 1
    return n
