"""Short-lived, single-use server-side records of a sign-in in progress.

WebAuthn challenges, SSO ``state`` records and the app shell's PKCE verifiers live in the
global ``auth_state`` table under ``flow#<kind>#<random>``. ``take`` deletes the record and returns what it held in one conditional DynamoDB call
(``DeleteItem`` with ``ReturnValues=ALL_OLD``), so two requests presenting the same id cannot both
succeed: the second finds nothing and is refused. Expiry is checked on read (DynamoDB's TTL sweep
is lazy), so a record is useless after ``ttl`` seconds even if it is still stored.
"""
from __future__ import annotations

import json
import secrets
from typing import Any

from pynamodb.exceptions import DoesNotExist

from chalicelib.core import aws, clock
from chalicelib.core.config import settings
from chalicelib.core.store.tables import global_model
from chalicelib.identity.models import FLOW, FlowAttrs, state_key


def _flows() -> type[FlowAttrs]:
    return global_model(FlowAttrs)


def put(kind: str, data: dict[str, Any], ttl: int, *, key: str | None = None) -> str:
    """Store ``data`` for ``ttl`` seconds; returns the random key (or ``key`` when given)."""
    key = key or secrets.token_urlsafe(24)
    _flows()(state_key(FLOW, kind, key), kind=kind, data=json.dumps(data), expires_at=int(clock.now()) + ttl).save(
        condition=FlowAttrs.pk.does_not_exist())
    return key


def take(kind: str, key: str) -> dict[str, Any] | None:
    """Consume the record: its data the first time (if not expired), None afterwards or when unknown."""
    if not key or len(key) > 256:
        return None
    ddb = aws.client("dynamodb", settings().global_region)
    old = ddb.delete_item(TableName=aws.table_name(FlowAttrs.TABLE), Key={"pk": {"S": state_key(FLOW, kind, key)}},
                          ReturnValues="ALL_OLD")
    attrs = old.get("Attributes")
    if not attrs:
        return None
    expires_at = float(attrs["expires_at"]["N"])
    if expires_at < clock.now():
        return None
    return json.loads(attrs["data"]["S"])


def peek(kind: str, key: str) -> dict[str, Any] | None:
    """Read without consuming (for pages that show a step before it is completed)."""
    try:
        item = _flows().get(state_key(FLOW, kind, key), consistent_read=True)
    except DoesNotExist:
        return None
    if item.expires_at < clock.now():
        return None
    return json.loads(item.data)
