"""The stored catalog snapshot: a new container's first read takes the object a full load wrote instead of
reloading the catalog from DynamoDB, brought up to date by version; anything it cannot trust means a full
load. AWS calls are counted, not timed."""
from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import Any

import pytest

from chalicelib.core import aws, clock
from chalicelib.core.authz import Principal
from chalicelib.core.tenancy import RequestScope
from chalicelib.gateway import models
from chalicelib.gateway.catalog import service as catalog
from chalicelib.gateway.catalog import snapshots
from chalicelib.gateway.catalog import versions as catalog_versions
from tests.functional.aws_calls import counting
from tests.functional.conftest import Tenant, make_tenant
from tests.functional.gateway.data import field, put_dataset

REGION = "us-east-1"


def _scope(t: Tenant, roles: tuple[str, ...] = ("admin",)) -> RequestScope:
    return RequestScope(Principal(user_id=t.user_id, workspace_id=t.workspace_id, roles=roles, email=t.email,
                                  amr=("pwd",), token_id="tok_test"), t.region)


def _names(t: Tenant, text: str | None = None, roles: tuple[str, ...] = ("admin",)) -> list[str]:
    page = catalog.search(_scope(t, roles), catalog.SearchFilters(text=text), limit=100)
    return [d["name"] for d in page["items"]]


def _as_another_container(workspace_id: str, dataset_id: str, **changes: Any) -> None:
    cls = models.datasets(REGION)
    item = cls.get(workspace_id, dataset_id, consistent_read=True)
    item.update(actions=[getattr(cls, name).set(value) for name, value in changes.items()])
    catalog_versions.record_change(REGION, workspace_id, datasets=[dataset_id])


@pytest.fixture
def loaded(tenant: Tenant) -> Iterator[tuple[Tenant, list[str]]]:
    ids = [put_dataset(tenant.workspace_id, REGION, f"table_{i}", [field("id", "INTEGER"), field("email")], [],
                       acl=[{"type": "role", "id": "admin"}] if i == 4 else None)
           for i in range(5)]
    catalog.invalidate()
    assert len(_names(tenant)) == 5  # a full load: it writes the object
    catalog.invalidate(keep_stored=True)  # from here on: a new container
    yield tenant, ids


def _loads(calls: Any) -> int:
    return calls["dynamodb Query datasets"]


def test_a_new_container_starts_from_the_stored_snapshot(loaded: tuple[Tenant, list[str]]) -> None:
    tenant, _ = loaded
    with counting() as calls:
        assert _names(tenant) == [f"table_{i}" for i in range(5)]
    assert _loads(calls) == 0 and calls["dynamodb Query connectors"] == 0
    assert sum(n for call, n in calls.items() if call.startswith("s3 GetObject")) == 1
    assert _names(tenant, roles=("member",)) == [f"table_{i}" for i in range(4)]  # ACLs kept: table_4 is Admin-only
    assert _names(tenant, "table_3") == ["table_3"]


def test_changes_after_the_snapshot_are_read_by_version(loaded: tuple[Tenant, list[str]]) -> None:
    tenant, ids = loaded
    _as_another_container(tenant.workspace_id, ids[1], name="renamed", description="now about invoices")
    _as_another_container(tenant.workspace_id, ids[3], acl=json.dumps([{"type": "role", "id": "admin"}]))
    with counting() as calls:
        assert _names(tenant, "invoices") == ["renamed"]
    assert _loads(calls) == 0
    assert calls["dynamodb GetItem datasets"] == 2  # only the two changed datasets
    assert "table_3" not in _names(tenant, roles=("member",))


@pytest.mark.parametrize("spoil", ["gap", "too_old", "missing", "another_workspace", "garbage", "newer"])
def test_a_snapshot_that_cannot_be_trusted_means_a_full_load(loaded: tuple[Tenant, list[str]], spoil: str) -> None:
    tenant, ids = loaded
    s3, bucket = aws.client("s3", REGION), aws.bucket_name("data", REGION)
    key = snapshots.key_of(tenant.workspace_id)
    if spoil == "gap":
        catalog_versions.record_change(REGION, tenant.workspace_id, everything=True)
    elif spoil == "too_old":
        clock.advance(catalog.FULL_RELOAD_SECONDS)
    elif spoil == "missing":
        s3.delete_object(Bucket=bucket, Key=key)
    elif spoil == "another_workspace":  # another workspace's snapshot copied under this one's key
        other = make_tenant("other@example.com", name="Other")
        put_dataset(other.workspace_id, REGION, "their_secret", [field("id", "INTEGER")], [])
        catalog.snapshot(other.region, other.workspace_id)
        s3.copy_object(Bucket=bucket, Key=key, CopySource={"Bucket": bucket, "Key": snapshots.key_of(other.workspace_id)})
        catalog.invalidate(keep_stored=True)
    elif spoil == "garbage":
        s3.put_object(Bucket=bucket, Key=key, Body=gzip.compress(b'{"format": 1, "records": "no"}'))
    else:  # a version the workspace has not reached: not written by this catalog
        body = json.loads(gzip.decompress(s3.get_object(Bucket=bucket, Key=key)["Body"].read()))
        body["version"] += 5
        body["records"][0][2] = "forged"
        s3.put_object(Bucket=bucket, Key=key, Body=gzip.compress(json.dumps(body).encode()))
    with counting() as calls:
        names = _names(tenant)
    assert _loads(calls) == 1
    assert names == [f"table_{i}" for i in range(5)]
    clock.reset()


def test_a_full_load_rewrites_the_snapshot(loaded: tuple[Tenant, list[str]]) -> None:
    tenant, ids = loaded
    catalog_versions.record_change(REGION, tenant.workspace_id, everything=True)
    _names(tenant)  # full load (a gap): writes the object at the new version
    stored = snapshots.read(REGION, tenant.workspace_id)
    assert stored is not None
    assert stored.version == catalog_versions.current(REGION, tenant.workspace_id).version
    catalog.invalidate(keep_stored=True)
    with counting() as calls:
        assert len(_names(tenant)) == 5
    assert _loads(calls) == 0


def test_invalidate_means_a_full_load_from_dynamodb(loaded: tuple[Tenant, list[str]]) -> None:
    """An explicit invalidation (a writer that did not record its change) never trusts the stored object."""
    tenant, _ = loaded
    catalog.invalidate(tenant.workspace_id)
    with counting() as calls:
        _names(tenant)
    assert _loads(calls) == 1
    catalog.invalidate()
    with counting() as calls:
        _names(tenant)
    assert _loads(calls) == 1
