"""The catalog version's bump: one conditional ``UpdateItem`` writes the version and its log entry together
when this process knows the current version; a version another process moved since is learnt from the
refusal; an unknown one costs the two-call bump. Every bump leaves the log entry readers need."""
from __future__ import annotations

from chalicelib.core import process_state
from chalicelib.gateway.catalog import versions
from tests.functional.aws_calls import counting
from tests.functional.conftest import Tenant

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
