"""``Idempotency-Key`` on POSTs that start work: the same key replays the first answer; the same key
with another body is a 409. Records live in the workspace's region and expire after 24 hours."""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import DoesNotExist, PutError

from chalicelib.core import clock
from chalicelib.core.http.errors import ApiError
from chalicelib.core.store.tables import BaseModel, regional

TTL_SECONDS = 24 * 3600
HEADER = "Idempotency-Key"
_KEY = re.compile(r"[ -~]{1,255}")  # printable ASCII: what an HTTP header carries portably


class IdempotencyAttrs(BaseModel):
    TABLE = "idempotency"
    key = UnicodeAttribute(hash_key=True)  # workspace_id#scope#key
    request_hash = UnicodeAttribute()
    status = NumberAttribute()
    response = UnicodeAttribute()  # JSON
    expires_at = NumberAttribute()


def _validate_key(key: str) -> None:
    if not _KEY.fullmatch(key):
        raise ApiError(400, "invalid_idempotency_key", "Idempotency-Key must be 1 to 255 printable ASCII characters.")


def run(region: str, workspace_id: str, scope: str, key: str | None, request: Any,
        work: Callable[[], tuple[int, Any]]) -> tuple[int, Any, bool]:
    """Run ``work`` once per key; returns ``(status, body, replayed)``.

    ``request`` is what identifies the call (the body and the path parameters); a replay with a
    different one is refused with 409 ``idempotency_key_reused``.
    """
    if key is None:
        status, body = work()
        return status, body, False
    _validate_key(key)
    digest = hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).hexdigest()
    cls = regional(IdempotencyAttrs, region)
    pk = f"{workspace_id}#{scope}#{key}"
    try:
        prior = cls.get(pk, consistent_read=True)
        if prior.expires_at > clock.now():
            if prior.request_hash != digest:
                raise ApiError(409, "idempotency_key_reused",
                               "This Idempotency-Key was already used with a different request.")
            return int(prior.status), json.loads(prior.response), True
    except DoesNotExist:
        pass
    status, body = work()
    if status < 500:
        try:
            cls(pk, request_hash=digest, status=status, response=json.dumps(body, default=str),
                expires_at=int(clock.now()) + TTL_SECONDS).save(condition=cls.key.does_not_exist())
        except PutError:
            pass  # a concurrent first call stored its answer; ours stands for this caller
    return status, body, False
