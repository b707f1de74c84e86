"""The catalog version's bump: one conditional ``UpdateItem`` writes the version and its log entry together
when this process knows the current version; a version another process moved since is learnt from the
refusal; an unknown one costs the two-call bump. Every bump leaves the log entry readers need. A request
reads the version with its scope (no call of its own) until it writes a catalog change itself."""
from __future__ import annotations

import pytest

from chalicelib.core import process_state
from chalicelib.gateway.catalog import versions
from tests.functional.aws_calls import counting
from tests.functional.conftest import Tenant, make_tenant

REGION = "us-east-1"


def test_a_known_version_is_bumped_in_one_call_and_a_stale_one_is_learnt(tenant: Tenant) -> None:
    ws = tenant.workspace_id
    start = versions.current(REGION, ws).version  # this process now knows the version
    with counting() as calls:
        assert versions.record_change(REGION, ws, datasets=["ds_a"]) == start + 1
    assert calls.total() == 1, calls
    # another process bumps twice: this one's version is stale
    known = dict(versions._last_seen)
    versions.record_change(REGION, ws, datasets=["ds_b"])
    versions.record_change(REGION, ws, connectors=["conn_c"])
    versions._last_seen.clear()
    versions._last_seen.update(known)
    with counting() as calls:
        assert versions.record_change(REGION, ws, datasets=["ds_d"]) == start + 4
    assert calls.total() == 2, calls  # refused (the item came back with the refusal), then written
    assert versions.current(REGION, ws).since(start) == ({"ds_a", "ds_b", "ds_d"}, {"conn_c"})


def test_a_process_that_never_saw_the_version_bumps_it_in_two_calls(tenant: Tenant) -> None:
    ws = tenant.workspace_id
    start = versions.current(REGION, ws).version
    process_state.reset_all()  # a new container
    with counting() as calls:
        assert versions.record_change(REGION, ws, everything=True) == start + 1
    assert calls.total() == 2, calls
    with counting() as calls:
        assert versions.record_change(REGION, ws, datasets=["ds_e"]) == start + 2
    assert calls.total() == 1, calls
    assert versions.current(REGION, ws).since(start + 1) == ({"ds_e"}, set())
    assert versions.current(REGION, ws).since(start) is None  # EVERYTHING: a full reload


def _begin(tenant: Tenant) -> None:
    """What a request does first: its scope (and the items read alongside it), then its membership."""
    from chalicelib.core import tenancy
    from chalicelib.core.tokens import RevocationCheck

    tenancy.begin_request(tenant.claims, RevocationCheck())
    assert tenancy.membership(tenant.workspace_id, tenant.user_id) is not None


@pytest.mark.parametrize("residency", ["us-east", "eu-central"])
def test_a_request_reads_the_version_with_its_scope_and_after_its_own_write_reads_it_again(
        stack: None, residency: str) -> None:
    from chalicelib.core.store import scope_versions

    tenant = make_tenant(residency=residency)
    ws, region = tenant.workspace_id, tenant.region
    start = versions.current(region, ws).version
    versions.record_change(region, ws, datasets=["ds_other_container"])  # before the request began
    with scope_versions.unit():
        with counting() as calls:
            _begin(tenant)
            assert versions.current(region, ws).version == start + 1  # as read with the scope: no call
        assert not [c for c in calls if "catalog_versions" in c and "GetItem" in c], calls
        assert versions.record_change(region, ws, datasets=["ds_mine"]) == start + 2
        with counting() as calls:
            assert versions.current(region, ws).version == start + 2  # its own write: read again
        assert calls["dynamodb GetItem catalog_versions"] == 1, calls
    with scope_versions.unit(), counting() as calls:  # a queue delivery's unit: no request scope read
        assert versions.current(region, ws).version == start + 2
    assert calls["dynamodb GetItem catalog_versions"] == 1, calls
