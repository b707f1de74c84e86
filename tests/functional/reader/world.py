"""One workspace for the leak matrix, built once per test module: for each field policy a synced dataset
``m_<policy>`` whose key column ``k`` (the row key, as a sync with ``primary_key: ["k"]`` writes it) and
non-key column ``v`` are under that policy, with two rows: one of an open document and one of a document
restricted to Admins by its per-document ACL. Every value of ``k`` and ``v`` is a unique marker
(``marker(role, policy, acl)``); every row also holds ALLOW text the searches and questions match."""
from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

from chalicelib.core.authz import Principal
from chalicelib.core.ids import new_id
from chalicelib.core.tenancy import scope_of
from chalicelib.gateway import reader
from chalicelib.knowledge import indexer
from tests.functional.conftest import Tenant, make_tenant
from tests.functional.gateway.data import field as column
from tests.functional.gateway.data import put_dataset
from tests.functional.platform.helpers import User, add_member

POLICIES = ("ALLOW", "MASK", "HASH", "REDACT", "DENY")
ROLES = ("key", "nonkey")
ACLS = ("open", "restricted")
TOPIC = "ledger"  # a word of every row's ALLOW text


@dataclass
class World:
    tenant: Tenant
    member: User
    datasets: dict[str, str]  # policy -> dataset id
    documents: dict[tuple[str, str], str]  # (policy, acl) -> document id
    markers: dict[tuple[str, str, str], str]  # (role, policy, acl) -> marker
    cache: dict[str, str] = field(default_factory=dict)  # surface name -> what it returned (read once)
    # the policies whose datasets the surfaces read (all of them, unless a case needs fewer)
    policies: tuple[str, ...] = POLICIES

    def name(self, policy: str) -> str:
        return f"m_{policy.lower()}"

    def admin(self) -> Principal:
        return Principal(user_id=self.tenant.user_id, workspace_id=self.tenant.workspace_id, roles=("admin",),
                         email=self.tenant.email, amr=("pwd", "mfa"), token_id="t")


def marker(role: str, policy: str, acl: str) -> str:
    """A value found nowhere else: letters and digits only (one search token), unique per run."""
    return f"zq{role}{policy.lower()}{acl}{secrets.token_hex(5)}"


def build() -> World:
    tenant = make_tenant("matrix-admin@example.com", name="Leak matrix")
    ws, region = tenant.workspace_id, tenant.region
    member = add_member(ws, "matrix-member@example.com", "member")
    w = World(tenant, member, {}, {}, {})
    for policy in POLICIES:
        rows: list[tuple[Any, ...]] = []
        for acl in ACLS:
            doc = new_id("doc")
            key, value = (marker(role, policy, acl) for role in ROLES)
            w.documents[(policy, acl)] = doc
            w.markers[("key", policy, acl)], w.markers[("nonkey", policy, acl)] = key, value
            # _key is the row key a sync derives from primary_key ["k"]: the key marker itself
            rows.append((key, doc, key, value, f"{TOPIC} entry of the {policy.lower()} books, {acl} part"))
        ds = put_dataset(ws, region, w.name(policy), [
            column("_key"), column("document_id"), column("k", "STRING", "PII", policy),
            column("v", "STRING", "PII", policy), column("topic")], rows, description="leak matrix")
        w.datasets[policy] = ds
        reader.set_document_acl(scope_of(w.admin()), ds, w.documents[(policy, "restricted")],
                                [{"type": "role", "id": "admin"}])
        indexer.index_dataset(region, ws, ds)
    return w
