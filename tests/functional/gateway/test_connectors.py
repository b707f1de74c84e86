"""Connector admin routes: roles, workspace isolation, bad input (400, nothing written), audit."""
from __future__ import annotations

import json

import pytest

from chalicelib.core import audit, aws
from chalicelib.core.config import settings
from chalicelib.gateway import models
from tests.functional.conftest import Tenant, make_tenant
from tests.functional.gateway.sync_helpers import READER_ROLE, call, client, drain, new_bucket, put, receive, token_for


def _create(c, token: str, bucket: str, **extra) -> tuple[int, dict]:
    return call(c, "POST", "/v1/connectors", token,
                {"name": "Sales", "kind": "s3", "config": {"role_arn": READER_ROLE, "bucket": bucket}, **extra})


def _nothing_written(tenant: Tenant) -> None:
    assert models.connectors(tenant.region).count(tenant.workspace_id) == 0
    assert models.sync_runs(tenant.region).count(tenant.workspace_id) == 0
    assert not receive(tenant.region)


def test_roles_member_and_viewer_cannot_manage_but_viewer_can_list(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    member, viewer = token_for(tenant, "member"), token_for(tenant, "viewer")
    with client() as c:
        for token in (member, viewer):
            st, err = _create(c, token, bucket)
            assert st == 403
            assert err["code"] == "forbidden"
        _nothing_written(tenant)
        st, conn = _create(c, tenant.token, bucket)
        assert st == 201
        for token in (member, viewer):
            assert call(c, "POST", f"/v1/connectors/{conn['id']}/sync", token)[0] == 403
            assert call(c, "PATCH", f"/v1/connectors/{conn['id']}", token, {"name": "x"})[0] == 403
            assert call(c, "DELETE", f"/v1/connectors/{conn['id']}", token)[0] == 403
            assert call(c, "POST", f"/v1/connectors/{conn['id']}/uploads", token, {"file_name": "a.txt"})[0] == 403
        assert not receive(tenant.region)
        st, listed = call(c, "GET", "/v1/connectors", viewer)
        assert st == 200
        assert [x["id"] for x in listed["connectors"]] == [conn["id"]]
        assert call(c, "GET", f"/v1/connectors/{conn['id']}", viewer)[0] == 200
        assert call(c, "GET", "/v1/connectors", "not-a-token")[0] == 401


def test_another_workspaces_connector_is_not_found(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    other = make_tenant(email="other@example.com", name="Other Co")
    with client() as c:
        st, conn = _create(c, tenant.token, bucket)
        for method, path, body in (("GET", f"/v1/connectors/{conn['id']}", None),
                                   ("PATCH", f"/v1/connectors/{conn['id']}", {"name": "mine now"}),
                                   ("DELETE", f"/v1/connectors/{conn['id']}", None),
                                   ("POST", f"/v1/connectors/{conn['id']}/sync", None)):
            st, err = call(c, method, path, other.token, body)
            assert st == 404, (method, path)
            assert err["code"] == "not_found", (method, path)
        assert call(c, "GET", "/v1/connectors", other.token)[1] == {"connectors": [], "has_more": False,
                                                                    "next_cursor": None}
        _, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token)
        assert call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", other.token)[0] == 404
        assert models.connectors(tenant.region).get(tenant.workspace_id, conn["id"]).name == "Sales"


@pytest.mark.parametrize("body, field", [
    ({"name": "x", "kind": "ftp", "config": {}}, "kind"),
    ({"name": "x", "kind": "s3", "config": {}}, "config.bucket"),
    ({"name": "x", "kind": "s3", "config": {"role_arn": READER_ROLE, "bucket": "Bad_Bucket!"}}, "config.bucket"),
    ({"name": "x", "kind": "s3", "config": {"role_arn": READER_ROLE, "bucket": "ok-bucket", "colour": "red"}}, "config.colour"),
    ({"name": "x", "kind": "s3", "config": {"role_arn": READER_ROLE, "bucket": "ok-bucket"}, "extra": 1}, "extra"),
    ({"name": "x", "kind": "s3", "config": {"role_arn": READER_ROLE, "bucket": "ok-bucket", "format": "xlsx"}}, "config.format"),
    ({"name": "", "kind": "s3", "config": {"role_arn": READER_ROLE, "bucket": "ok-bucket"}}, "name"),
    ({"name": "x", "kind": "s3", "config": {"role_arn": READER_ROLE, "bucket": "ok-bucket"}, "dataset_name": "1 bad"}, "dataset_name"),
    ({"name": "x", "kind": "http", "config": {"url": "ftp://example.com/x"}}, "config.url"),
    ({"name": "x", "kind": "http", "config": {"url": "https://example.com", "page_size": 0}}, "config.page_size"),
    ({"name": "x", "kind": "dynamodb", "config": {"role_arn": READER_ROLE, "table": 7}}, "config.table"),
    ({"name": "x", "kind": "documents", "config": {"max_passage_chars": 300, "overlap_chars": 300}},
     "config.overlap_chars"),
])
def test_bad_connector_input_is_refused_and_nothing_is_written(tenant: Tenant, body: dict, field: str) -> None:
    with client() as c:
        st, err = call(c, "POST", "/v1/connectors", tenant.token, body)
    assert st == 400, err
    assert err["code"] == "validation_failed", err
    assert field in [e["field"] for e in err["errors"]], err
    _nothing_written(tenant)


def test_platform_own_buckets_and_tables_are_refused(tenant: Tenant) -> None:
    with client() as c:
        st, err = _create(c, tenant.token, aws.bucket_name("data", tenant.region))
        assert st == 400
        assert err["errors"][0]["field"] == "config.bucket"
        st, err = call(c, "POST", "/v1/connectors", tenant.token, {
            "name": "x", "kind": "dynamodb", "config": {"role_arn": READER_ROLE, "table": f"{settings().resource_prefix}-memberships"}})
        assert st == 400
        assert err["errors"][0]["field"] == "config.table"
    _nothing_written(tenant)


def test_bad_sync_requests_and_malformed_json(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    with client() as c:
        _, conn = _create(c, tenant.token, bucket)
        path = f"/v1/connectors/{conn['id']}/sync"
        for body in ({"mode": "SOMETIMES"}, {"mode": "FULL_REFRESH", "force": True}, {"mode": 3}):
            st, err = call(c, "POST", path, tenant.token, body)
            assert st == 400, (body, err)
            assert err["code"] == "validation_failed", (body, err)
        assert call(c, "POST", path, tenant.token, "{nope")[0] == 400
        assert call(c, "POST", "/v1/connectors", tenant.token, "{nope")[0] == 400
        assert call(c, "POST", "/v1/connectors/conn_bogus/sync", tenant.token)[0] == 404
        assert call(c, "GET", "/v1/connectors?status=sleepy", tenant.token)[0] == 400
        assert call(c, "GET", "/v1/connectors?colour=red", tenant.token)[0] == 400
        assert call(c, "PATCH", f"/v1/connectors/{conn['id']}", tenant.token, {"kind": "http"})[0] == 400
        assert call(c, "PATCH", f"/v1/connectors/{conn['id']}", tenant.token, {"config": {"bucket": "x"}})[0] == 400
        assert models.sync_runs(tenant.region).count(tenant.workspace_id) == 0
        assert not receive(tenant.region)
        assert models.connectors(tenant.region).get(tenant.workspace_id, conn["id"]).config == \
            json.dumps({"role_arn": READER_ROLE, "bucket": bucket})


def test_crud_filters_pause_delete_and_audit(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    with client() as c:
        _, a = _create(c, tenant.token, bucket)
        st, dup = _create(c, tenant.token, bucket)
        assert st == 409
        assert dup["code"] == "dataset_name_taken"
        _, b = call(c, "POST", "/v1/connectors", tenant.token, {"name": "Docs", "kind": "documents", "config": {}})
        _, listed = call(c, "GET", "/v1/connectors?category=DOCUMENTS", tenant.token)
        assert [x["id"] for x in listed["connectors"]] == [b["id"]]
        st, paused = call(c, "PATCH", f"/v1/connectors/{a['id']}", tenant.token, {"paused": True, "name": "Sales 2"})
        assert st == 200
        assert paused["status"] == "PAUSED"
        assert paused["name"] == "Sales 2"
        _, listed = call(c, "GET", "/v1/connectors?status=PAUSED", tenant.token)
        assert [x["id"] for x in listed["connectors"]] == [a["id"]]
        st, err = call(c, "POST", f"/v1/connectors/{a['id']}/sync", tenant.token)
        assert st == 409
        assert err["code"] == "connector_paused"
        st, err = call(c, "POST", f"/v1/connectors/{a['id']}/uploads", tenant.token, {"file_name": "a.txt"})
        assert st == 409
        assert call(c, "DELETE", f"/v1/connectors/{a['id']}", tenant.token)[1] == {"id": a["id"], "deleted": True}
        assert call(c, "GET", f"/v1/connectors/{a['id']}", tenant.token)[0] == 404
    actions = [e.action for e in audit.model(tenant.region).query(tenant.workspace_id)]
    for action in ("connector.created", "connector.updated", "connector.deleted"):
        assert action in actions


def test_delete_removes_dataset_data_and_lineage_but_not_while_syncing(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    put(tenant.region, bucket, "a.csv", "a\n1\n")
    with client() as c:
        _, conn = _create(c, tenant.token, bucket)
        call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token)
        drain(tenant.region)
        ds_id = conn["dataset"]["id"]
        assert models.datasets(tenant.region).count(tenant.workspace_id) == 1
        item = models.connectors(tenant.region).get(tenant.workspace_id, conn["id"])
        item.update(actions=[models.ConnectorAttrs.lock_owner.set("sync_x"),
                             models.ConnectorAttrs.lock_expires_at.set(2**40)])
        st, err = call(c, "DELETE", f"/v1/connectors/{conn['id']}", tenant.token)
        assert st == 409
        assert err["code"] == "sync_in_progress"
        item.update(actions=[models.ConnectorAttrs.lock_owner.remove()])
        assert call(c, "DELETE", f"/v1/connectors/{conn['id']}", tenant.token)[0] == 200
    assert models.datasets(tenant.region).count(tenant.workspace_id) == 0
    assert models.lineage_edges(tenant.region).count(tenant.workspace_id) == 0
    data = aws.client("s3", tenant.region).list_objects_v2(Bucket=aws.bucket_name("data", tenant.region),
                                                            Prefix=f"datasets/{tenant.workspace_id}/{ds_id}/")
    assert data.get("KeyCount", 0) == 0
