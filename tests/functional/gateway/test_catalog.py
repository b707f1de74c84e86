"""Catalog reload by version: a change made elsewhere is seen on the next read, and nothing is reloaded
when nothing changed (DynamoDB calls counted, not timed)."""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.client import BaseClient

from chalicelib.core import aws, clock
from chalicelib.core.authz import Principal
from chalicelib.core.config import settings
from chalicelib.core.tenancy import scope_of
from chalicelib.gateway import models
from chalicelib.gateway.catalog import lineage, snapshot_cache
from chalicelib.gateway.catalog import service as catalog
from chalicelib.gateway.catalog import versions as catalog_versions
from chalicelib.gateway.query import service as query_mod
from tests.functional.conftest import Tenant
from tests.functional.gateway.data import field, put_dataset
from tests.functional.gateway.sync_helpers import drain


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every DynamoDB call made through botocore (boto3 and PynamoDB alike), as '<operation> <table>'."""
    seen: Counter[str] = Counter()
    real = BaseClient._make_api_call

    def counting(self: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        if self.meta.service_model.service_name == "dynamodb":
            seen[f"{operation} {str(params.get('TableName', '')).rsplit('-', 1)[-1]}"] += 1
        return real(self, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", counting)
    return seen


def _principal(t: Tenant, roles: tuple[str, ...] = ("admin",)) -> Principal:
    return Principal(user_id=t.user_id, workspace_id=t.workspace_id, roles=roles, email=t.email, amr=("pwd",),
                     token_id="tok_test")


def _names(t: Tenant, text: str | None = None, roles: tuple[str, ...] = ("admin",)) -> list[str]:
    page = catalog.search(scope_of(_principal(t, roles)), catalog.SearchFilters(text=text), limit=100)
    return [d["name"] for d in page["items"]]


@pytest.fixture
def seeded(tenant: Tenant) -> Iterator[tuple[Tenant, list[str]]]:
    ids = [put_dataset(tenant.workspace_id, "us-east-1", f"table_{i}", [field("id", "INTEGER"), field("email")], [])
           for i in range(5)]
    catalog.invalidate()  # as a new container: nothing cached
    yield tenant, ids


def _as_another_container(workspace_id: str, dataset_id: str, **changes: Any) -> None:
    """What a writer in another container does: write the dataset, then record the change; this
    process's snapshot is not touched."""
    cls = models.datasets("us-east-1")
    item = cls.get(workspace_id, dataset_id, consistent_read=True)
    item.update(actions=[getattr(cls, name).set(value) for name, value in changes.items()])
    catalog_versions.record_change("us-east-1", workspace_id, datasets=[dataset_id])


def test_no_reload_when_nothing_changed(seeded: tuple[Tenant, list[str]], calls: Counter[str]) -> None:
    tenant, _ = seeded
    assert len(_names(tenant)) == 5
    assert calls["Query datasets"] >= 1  # the first read of this container loads the workspace
    calls.clear()
    for _ in range(3):
        assert len(_names(tenant, "table")) == 5
    # each read costs one version check and nothing else from DynamoDB
    assert calls == Counter({"GetItem catalog_versions": 3})


def test_a_change_in_another_container_is_seen_on_the_next_search(seeded: tuple[Tenant, list[str]],
                                                                    calls: Counter[str]) -> None:
    tenant, ids = seeded
    assert "renamed" not in _names(tenant)
    calls.clear()
    _as_another_container(tenant.workspace_id, ids[2], name="renamed", description="now about invoices")
    calls.clear()
    assert _names(tenant, "invoices") == ["renamed"]
    # only the changed dataset was read again: no query of the workspace's datasets
    assert calls["Query datasets"] == 0
    assert calls["GetItem datasets"] == 1
    assert "table_2" not in _names(tenant)


def test_an_acl_change_elsewhere_hides_the_dataset_at_once(seeded: tuple[Tenant, list[str]]) -> None:
    tenant, ids = seeded
    member = ("member",)
    assert "table_1" in _names(tenant, roles=member)  # the default ACL lets members read
    _as_another_container(tenant.workspace_id, ids[1], acl=json.dumps([{"type": "role", "id": "admin"}]))
    assert "table_1" not in _names(tenant, roles=member)
    assert "table_1" in _names(tenant)


def test_a_field_policy_change_elsewhere_reaches_search_and_schema(seeded: tuple[Tenant, list[str]]) -> None:
    tenant, ids = seeded
    member = ("member",)
    assert _names(tenant, "email", roles=member) == [f"table_{i}" for i in range(5)]
    schema = [field("id", "INTEGER"), field("email", policy="DENY")]
    _as_another_container(tenant.workspace_id, ids[0], schema=json.dumps(schema))
    assert "table_0" not in _names(tenant, "email", roles=member)  # a DENY field is not searchable
    fields = catalog.schema_of(scope_of(_principal(tenant, member)), ids[0])["fields"]
    assert [f["name"] for f in fields] == ["id"]


def test_a_deletion_elsewhere_removes_the_dataset(seeded: tuple[Tenant, list[str]]) -> None:
    tenant, ids = seeded
    assert len(_names(tenant)) == 5
    models.datasets("us-east-1").get(tenant.workspace_id, ids[4]).delete()
    catalog_versions.record_change("us-east-1", tenant.workspace_id, datasets=[ids[4]])
    assert "table_4" not in _names(tenant)
    with pytest.raises(Exception, match="dataset"):
        catalog.get(scope_of(_principal(tenant)), ids[4])


def test_a_write_through_the_catalog_is_seen_by_another_container(seeded: tuple[Tenant, list[str]]) -> None:
    tenant, ids = seeded
    admin = _principal(tenant)
    assert catalog.schema_of(scope_of(admin), ids[3])["fields"][1]["policy"] == "ALLOW"
    snapshot_before = catalog.snapshot(tenant.region, tenant.workspace_id)
    catalog.set_field_policy(scope_of(admin), ids[3], "email", "MASK")
    # the other container still holds the old snapshot: put it back and read again
    with snapshot_cache._lock:
        snapshot_cache._cache[tenant.workspace_id] = snapshot_before
    snapshot_before.checked_at = float("-inf")
    assert catalog.schema_of(scope_of(admin), ids[3])["fields"][1]["policy"] == "MASK"


def test_a_unit_of_work_sees_a_policy_set_elsewhere_within_its_bound(tenant: Tenant) -> None:
    """An agent run's delivery (``one_version_within``, bound ``KNOWLEDGE_CACHE_SECONDS``) trusts one version
    check for the bound: a field policy set in another container reaches its next query within the bound
    and no later. Outside such a unit, the next query sees it (``CATALOG_CACHE_SECONDS`` 0)."""
    fields = [field("id", "INTEGER"), field("email")]
    ds = put_dataset(tenant.workspace_id, "us-east-1", "people", fields, [(1, "ana@example.com")])
    catalog.invalidate()
    member = _principal(tenant, ("member",))
    bound = settings().knowledge_cache_seconds
    assert bound > 0 and settings().catalog_cache_seconds == 0

    def email() -> Any:
        return query_mod.run(scope_of(member), "SELECT email FROM people")["rows"][0][0]

    def set_policy(policy: str) -> None:
        _as_another_container(tenant.workspace_id, ds, schema=json.dumps([fields[0], field("email", policy=policy)]))

    with clock.frozen():
        with catalog.one_version_within(bound):
            assert email() == "ana@example.com"
            set_policy("MASK")
            clock.advance(bound - 0.1)
            assert email() == "ana@example.com"  # the check made at the start is trusted for the bound
            clock.advance(0.2)
            masked = email()
            assert masked != "ana@example.com" and "ana" not in str(masked)
        set_policy("REDACT")
        assert email() is None  # outside the unit: the next read checks the version


def test_a_query_checks_the_version_beside_its_run_and_never_answers_from_a_stale_catalog(
        tenant: Tenant, calls: Counter[str]) -> None:
    """A query runs on this container's snapshot while the version check it is due runs alongside
    (``checked_alongside``): one check per query as before, and an answer (or error) computed from a
    snapshot the check finds stale is thrown away and computed again, so a policy set or a dataset made in
    another container applies to the very next query."""
    fields = [field("id", "INTEGER"), field("email")]
    ds = put_dataset(tenant.workspace_id, "us-east-1", "people", fields, [(1, "ana@example.com")])
    catalog.invalidate()
    member = _principal(tenant, ("member",))

    def email() -> Any:
        return query_mod.run(scope_of(member), "SELECT email FROM people")["rows"][0][0]

    assert email() == "ana@example.com"
    checks = catalog.stats.version_checks
    calls.clear()
    assert email() == "ana@example.com"
    assert catalog.stats.version_checks == checks + 1
    assert calls["GetItem catalog_versions"] == 1 and calls["Query datasets"] == calls["GetItem datasets"] == 0

    _as_another_container(tenant.workspace_id, ds, schema=json.dumps([fields[0], field("email", policy="REDACT")]))
    assert email() is None  # the first answer, from the old policy, was not returned
    drain(tenant.region)  # the queries' lineage messages, written by the worker
    edges = models.lineage_edges("us-east-1")
    node = lineage.query_node([ds], clock.utcnow().strftime("%Y-%m-%d"))
    assert edges.get(tenant.workspace_id, f"{ds}>{node}").uses == 3  # one use per query, run again or not

    before = catalog.snapshot(tenant.region, tenant.workspace_id)
    late = put_dataset(tenant.workspace_id, "us-east-1", "late", fields, [(2, "bo@example.com")])
    catalog_versions.record_change("us-east-1", tenant.workspace_id, datasets=[late])  # written elsewhere
    with snapshot_cache._lock:  # ... so this container still holds the snapshot without it, its check due
        snapshot_cache._cache[tenant.workspace_id] = before
    before.checked_at = 0.0
    assert query_mod.run(scope_of(member), "SELECT count(*) FROM late")["rows"] == [[1]]  # not "no such dataset"


def test_a_query_after_a_change_made_here_checks_first(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot this container knows is stale (it wrote a change) is not used ahead of the check: the
    query checks and reloads first, as before."""
    ds = put_dataset(tenant.workspace_id, "us-east-1", "people", [field("id", "INTEGER"), field("email")],
                     [(1, "ana@example.com")])
    catalog.invalidate()
    admin, member = _principal(tenant), _principal(tenant, ("member",))
    query_mod.run(scope_of(member), "SELECT email FROM people")
    catalog.set_field_policy(scope_of(admin), ds, "email", "REDACT")
    ahead: list[str] = []
    real = aws.alongside
    monkeypatch.setattr(aws, "alongside", lambda fn, *a, **k: ahead.append(fn.__name__) or real(fn, *a, **k))
    assert query_mod.run(scope_of(member), "SELECT email FROM people")["rows"] == [[None]]
    assert "current" not in ahead
    query_mod.run(scope_of(member), "SELECT email FROM people")
    assert "current" in ahead  # the next query, with the snapshot checked and current, runs beside its check


def test_a_gap_in_the_change_log_means_a_full_reload(seeded: tuple[Tenant, list[str]], calls: Counter[str]) -> None:
    tenant, ids = seeded
    _names(tenant)
    for _ in range(catalog_versions.KEEP + 1):
        catalog_versions.record_change("us-east-1", tenant.workspace_id, datasets=[ids[0]])
    calls.clear()
    before = catalog.stats.full_loads
    assert len(_names(tenant)) == 5
    assert catalog.stats.full_loads == before + 1
    assert calls["Query datasets"] == 1


def test_a_change_too_wide_to_name_means_a_full_reload(seeded: tuple[Tenant, list[str]]) -> None:
    tenant, _ = seeded
    _names(tenant)
    before = catalog.stats.full_loads
    catalog_versions.record_change("us-east-1", tenant.workspace_id, everything=True)
    _names(tenant)
    assert catalog.stats.full_loads == before + 1
    item = aws.client("dynamodb", "us-east-1").get_item(
        TableName=aws.table_name("catalog_versions"), Key={"workspace_id": {"S": tenant.workspace_id}})["Item"]
    assert len(item) <= catalog_versions.KEEP + 2  # the log keeps the last versions only
