"""Labels against a reader's live rights (``agents/labels.py``), over a catalog snapshot made in memory:
a dataset that is gone or no longer readable, a field policy made stricter (or looser), a document list
narrowed or removed, a label this code does not know, and what counts as restricted for outbound tools."""
from __future__ import annotations

from typing import Any

import pytest

from chalicelib.agents import labels
from chalicelib.core.authz import Principal
from chalicelib.core.tenancy import RequestScope
from chalicelib.gateway.catalog import service as catalog

WS = "ws_1"


def _who(role: str = "member", user: str = "usr_1") -> RequestScope:
    return RequestScope(Principal(user_id=user, workspace_id=WS, roles=(role,), email="", amr=("pwd",), token_id="t"),
                        "us-east-1")


def _dataset(ds: str, *, policies: dict[str, str], acl: list[str], row_acl: dict[str, list[str]] | None = None,
             classification: str = "INTERNAL") -> catalog.DatasetRecord:
    entries = [{"type": a.split(":")[0], "id": a.split(":")[1]} for a in acl]
    rec = catalog.DatasetRecord(
        id=ds, workspace_id=WS, name=ds, connector_id=None, owner="", description="",
        fields=[{"name": n, "type": "STRING", "classification": "INTERNAL", "policy": p} for n, p in policies.items()],
        acl=entries, data_prefix=None, row_count=0, schema_version=1, last_synced_at=None,
        created_at="2026-01-01T00:00:00Z", updated_at="2026-01-01T00:00:00Z", classification=classification)
    rec.acl_keys = frozenset(acl)
    rec.row_acl = {doc: [{"type": a.split(":")[0], "id": a.split(":")[1]} for a in keys]
                   for doc, keys in (row_acl or {}).items()}
    return rec


@pytest.fixture
def catalog_of(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Install datasets as the workspace's catalog snapshot."""
    def install(*records: catalog.DatasetRecord) -> None:
        snap = catalog.Snapshot(loaded_at=0, datasets={r.id: r for r in records}, ordered=list(records),
                                connectors={})
        monkeypatch.setattr(catalog, "snapshot_of", lambda scope, trust_seconds=None: snap)
    return install


MEMBERS = ["role:admin", "role:member"]


def test_no_label_needs_no_catalog() -> None:
    assert labels.satisfied(_who(), set())
    assert not labels.restricted(_who(), set())


def test_a_dataset_label_follows_the_dataset_acl(catalog_of: Any) -> None:
    catalog_of(_dataset("ds_a", policies={}, acl=MEMBERS), _dataset("ds_b", policies={}, acl=["role:admin"]))
    assert labels.satisfied(_who(), {("dataset", "ds_a", "INTERNAL")})
    assert not labels.satisfied(_who(), {("dataset", "ds_b", "INTERNAL")})  # not in its ACL
    assert labels.satisfied(_who("admin"), {("dataset", "ds_b", "INTERNAL")})
    assert not labels.satisfied(_who("admin"), {("dataset", "ds_gone", "INTERNAL")})  # deleted: nobody


@pytest.mark.parametrize(("written", "live", "shown"), [
    ("MASK", "MASK", True), ("MASK", "ALLOW", True), ("MASK", "DENY", False), ("MASK", "HASH", False),
    ("ALLOW", "MASK", False), ("ALLOW", "ALLOW", True)])
def test_a_field_label_follows_the_live_policy(catalog_of: Any, written: str, live: str, shown: bool) -> None:
    catalog_of(_dataset("ds_a", policies={"email": live}, acl=MEMBERS))
    assert labels.satisfied(_who(), {("field", "ds_a", "email", written)}) is shown


def test_a_document_label_follows_the_live_list(catalog_of: Any) -> None:
    label = {("document", "ds_a", "doc_1")}
    catalog_of(_dataset("ds_a", policies={}, acl=MEMBERS, row_acl={"doc_1": ["role:admin", "user:usr_1"]}))
    assert labels.satisfied(_who(), label)
    assert not labels.satisfied(_who(user="usr_2"), label)
    catalog_of(_dataset("ds_a", policies={}, acl=MEMBERS, row_acl={"doc_1": ["role:admin"]}))  # narrowed
    assert not labels.satisfied(_who(), label) and labels.satisfied(_who("admin"), label)
    catalog_of(_dataset("ds_a", policies={}, acl=MEMBERS))  # the list removed: open to the dataset's readers
    assert labels.satisfied(_who(), label)


def test_what_cannot_be_read_is_never_satisfied(catalog_of: Any) -> None:
    catalog_of(_dataset("ds_a", policies={}, acl=MEMBERS))
    assert not labels.satisfied(_who("admin"), {("future_kind", "ds_a", "x")})
    assert not labels.satisfied(_who("admin"), labels.loads("{not json"))
    assert labels.loads(labels.dumps({("dataset", "ds_a", "PII")})) == {("dataset", "ds_a", "PII")}


def test_what_is_restricted_for_an_outbound_tool(catalog_of: Any) -> None:
    catalog_of(_dataset("ds_a", policies={"city": "ALLOW"}, acl=MEMBERS),
               _dataset("ds_b", policies={}, acl=["role:admin"]))
    who = _who()
    assert not labels.restricted(who, {("dataset", "ds_a", "INTERNAL"), ("field", "ds_a", "city", "ALLOW")})
    assert labels.restricted(who, {("dataset", "ds_a", "CONFIDENTIAL")})
    assert labels.restricted(who, {("field", "ds_a", "city", "HASH")})
    assert labels.restricted(who, {("document", "ds_a", "doc_1")})
    assert labels.restricted(who, {("dataset", "ds_b", "INTERNAL")})  # its ACL leaves Members out
