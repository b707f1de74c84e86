"""A sync indexes what it wrote: a documents connector's upload is searchable after the sync job ran
(the composition root hands the indexer to the sync worker; no explicit index call), with the passage's place in the file as its span; a re-sync of changed text
publishes a new build and retires the old one."""
from __future__ import annotations

from chalicelib.core import aws
from chalicelib.core.authz import Principal
from chalicelib.core.tenancy import scope_of
from chalicelib.gateway import models
from chalicelib.gateway.ingest import connectors, sync
from chalicelib.gateway.ingest.sources import documents
from chalicelib.knowledge import service, store
from tests.functional.conftest import Tenant
from tests.functional.gateway.sync_helpers import drain

TEXT = "# Office\n\nThe office plant is watered every Tuesday by the facilities team.\n"


def _admin(t: Tenant) -> Principal:
    return Principal(user_id=t.user_id, workspace_id=t.workspace_id, roles=("admin",), email=t.email, amr=("pwd",),
                     token_id="t")


def _upload_and_sync(t: Tenant, conn_id: str, key_suffix: str, text: str, n: int) -> None:
    key = documents.prefix(t.workspace_id, conn_id) + key_suffix
    aws.client("s3", t.region).put_object(Bucket=aws.bucket_name(documents.BUCKET, t.region), Key=key,
                                          Body=text.encode())
    run = sync.request_sync(scope_of(_admin(t)), conn_id, mode="INCREMENTAL", idempotency_key=f"hook-{n}")
    delivered = drain(t.region)  # the queued message, through the sync job (``workers/jobs.sync_jobs``)
    assert delivered and not any(out["batchItemFailures"] for out in delivered), delivered
    assert sync.get_sync_run(scope_of(_admin(t)), run["id"])["status"] == "SUCCEEDED"


def test_sync_indexes_documents(tenant: Tenant) -> None:
    created = connectors.create_connector(scope_of(_admin(tenant)), {"name": "Office docs", "kind": "documents",
                                                           "dataset_name": "office_docs", "config": {}}, None)
    conn = models.connectors(tenant.region).get(tenant.workspace_id, created["id"])
    _upload_and_sync(tenant, conn.id, "doc_01HZZZZZZZZZZZZZZZZZZZZZZ9/office.md", TEXT, 1)
    hits = service.search(scope_of(_admin(tenant)), "who waters the office plant", 3)
    assert hits
    assert hits[0].chunk.title == "office.md"
    c = hits[0].chunk
    assert TEXT[c.start:c.end] == c.text
    first = store.manifests(tenant.region, tenant.workspace_id).indexes[conn.dataset_id].prefix
    _upload_and_sync(tenant, conn.id, "doc_01HZZZZZZZZZZZZZZZZZZZZZZ9/office.md",
                     TEXT.replace("Tuesday", "Friday"), 2)
    store.invalidate(tenant.workspace_id)
    m = store.manifests(tenant.region, tenant.workspace_id).indexes[conn.dataset_id]
    assert m.prefix != first
    assert "Friday" in service.search(scope_of(_admin(tenant)), "office plant watered", 1)[0].chunk.text
    listed = aws.client("s3", tenant.region).list_objects_v2(Bucket=aws.bucket_name("knowledge", tenant.region),
                                                             Prefix=first).get("Contents", [])
    assert listed == []  # the previous build is gone
