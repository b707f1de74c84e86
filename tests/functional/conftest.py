from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import moto.core as moto_core
import pytest
from moto import mock_aws
from moto.dynamodb.models import dynamodb_backends
from moto.s3.models import s3_backends
from moto.sqs.models import sqs_backends

from chalicelib.core import aws, clock, process_state
from chalicelib.core.config import settings
from chalicelib.core.regions import OPEN_REGIONS
from chalicelib.identity import users
from chalicelib.identity.oauth import signing
from chalicelib.identity.oauth.signing import issue_access_token
from chalicelib.platform.workspaces.service import create_workspace
from infra.bootstrap import bootstrap_all
from infra.resources import BUCKETS, QUEUES, TABLES


def reset_process_state() -> None:
    """Forget every per-process cache (``core.process_state``) and the clock offset."""
    process_state.reset_all()
    clock.reset()


def _wipe() -> None:
    """Empty every declared table, bucket and queue (moto keeps them between tests).

    Done in moto's own in-process stores, not through the AWS API: emptying them call by call (a scan and a
    delete per item, a listing per bucket, a queue deleted and made again) cost a third of a second per
    test. Tables keep their indexes and change streams (whose sequence numbers only grow: a reader's
    checkpoint stays valid); compliance-locked buckets keep their objects (tests use unique keys there);
    queues keep their attributes and lose their messages."""
    account = moto_core.DEFAULT_ACCOUNT_ID
    tables = {aws.table_name(t.name) for t in TABLES}
    for region in {settings().global_region, *OPEN_REGIONS}:
        for name, table in dynamodb_backends[account][region].tables.items():
            if name in tables:
                table.items = defaultdict(dict)
    wiped_buckets = {aws.bucket_name(b.name, region) for b in BUCKETS if not b.object_lock_days for region in OPEN_REGIONS}
    for bucket in s3_backends[account]["global"].buckets.values():
        if bucket.name in wiped_buckets:
            for _, versions in bucket.keys.iterlists():
                for version in versions:
                    if hasattr(version, "dispose"):
                        version.dispose()
            bucket.keys = type(bucket.keys)()
    queues = {aws.queue_name(q.name + suffix) for q in QUEUES for suffix in ("", "-dlq")}
    for region in OPEN_REGIONS:
        for name, queue in sqs_backends[account][region].queues.items():
            if name in queues:
                with queue._messages_lock:
                    queue._messages.clear()
                    queue._pending_messages.clear()
                    queue.deleted_messages.clear()


@pytest.fixture(scope="package")
def _moto() -> Iterator[None]:
    for name in [n for n in os.environ if n.startswith("AWS_ENDPOINT_URL")]:
        del os.environ[name]
    reset_process_state()
    process_state.reset_all(derived=True)
    with mock_aws():
        bootstrap_all()
        yield
    # clients and bound models made under the mock must not outlive it (they would reach real AWS)
    process_state.reset_all(derived=True)
    reset_process_state()


@pytest.fixture
def stack(_moto: None) -> Iterator[None]:
    """Both regions bootstrapped in moto, with every declared table, bucket and queue empty but the token
    signing key (``signing_key``)."""
    _wipe()
    reset_process_state()
    signing_key()
    yield
    reset_process_state()


_SIGNING_KEY: list[tuple[Any, dict[str, Any]]] = []  # (the emulator's KMS state it was made in, the key's item)


def signing_key() -> None:
    """An active token signing key: the process's first one put back after a wipe rather than a new one
    generated per test (an RSA key pair costs about a tenth of a second). Its private part is encrypted
    under a KMS key, which outlives a wipe but not a reset of the emulator (``BackendDict.reset()``, as
    the emulator's snapshot tests do): then a new one is made. Tests of rotation make their own."""
    from moto.backends import get_backend
    from moto.core import DEFAULT_ACCOUNT_ID

    region = settings().global_region
    ddb, table = aws.client("dynamodb", region), aws.table_name("signing_keys")
    keys = get_backend("kms")[DEFAULT_ACCOUNT_ID][region]
    if _SIGNING_KEY and _SIGNING_KEY[0][0] is keys:
        ddb.put_item(TableName=table, Item=_SIGNING_KEY[0][1])
        return
    signing.ensure_key()
    _SIGNING_KEY[:] = [(keys, ddb.scan(TableName=table, ConsistentRead=True)["Items"][0])]


@dataclass
class Tenant:
    user_id: str
    email: str
    workspace_id: str
    region: str
    token: str
    claims: dict[str, Any]


def make_tenant(email: str = "owner@example.com", residency: str = "us-east", name: str = "Acme",
                enforce_mfa: bool = False) -> Tenant:
    user = users.find_by_email(email) or users.create_user(email, email_verified=True)
    ws = create_workspace(owner_id=user.id, owner_email=user.email, name=name, residency=residency,
                          enforce_mfa=enforce_mfa)
    token, claims = issue_access_token(user_id=user.id, email=user.email, workspace_id=ws.id,
                                       roles=["admin"], amr=["pwd", "otp", "mfa"])
    return Tenant(user.id, user.email, ws.id, ws.region, token, claims)


@pytest.fixture
def tenant(stack: None) -> Tenant:
    return make_tenant()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def stored_items(region: str, table: str) -> list[str]:
    """Every item of a declared table in ``region``, each as its DynamoDB JSON (for residency checks)."""
    import json as _json

    ddb = aws.client("dynamodb", region)
    return [_json.dumps(item) for page in ddb.get_paginator("scan").paginate(TableName=aws.table_name(table))
            for item in page["Items"]]


class Outbox:
    """The local mail outbox (``MAIL_OUTBOX_DIR``) as the tests read it."""

    def __init__(self, path: Any) -> None:
        self.path = path

    def messages(self, to: str | None = None) -> list[dict[str, Any]]:
        import json as _json

        out = [_json.loads(p.read_text()) for p in sorted(self.path.glob("*.json"))]
        return [m for m in out if to is None or m["to"] == to]

    def _last(self, to: str, tag: str, pattern: str) -> str:
        """``pattern``'s first group in the latest message tagged ``tag`` sent to ``to``."""
        import re as _re

        msgs = [m for m in self.messages(to) if m["tag"] == tag]
        assert msgs, f"no {tag} message sent to {to}"
        found = _re.search(pattern, msgs[-1]["text"])
        assert found, f"the last {tag} message to {to} holds no match for {pattern}"
        return found.group(1)

    def last_code(self, to: str) -> str:
        return self._last(to, "signin-code", r"\b(\d{8})\b")

    def last_link(self, to: str) -> str:
        return self._last(to, "reset", r"(https?://\S+)")


@pytest.fixture
def outbox(stack: None, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Outbox:
    monkeypatch.setenv("MAIL_OUTBOX_DIR", str(tmp_path / "outbox"))
    settings.cache_clear()
    (tmp_path / "outbox").mkdir()
    return Outbox(tmp_path / "outbox")


def is_scope_version_item(item: dict[str, Any], workspace_id: str) -> bool:
    """Whether a global ``revoked_tokens`` item (DynamoDB JSON) is the workspace's scope version item: its key
    and counters only (``core/store/scope_versions.py``), the one regional fact the global store keeps."""
    return item.get("jti") == {"S": f"scope:{workspace_id}"} and all(
        set(v) == {"N"} for k, v in item.items() if k != "jti")
