"""Demo knowledge for ``make run``: a ``documents`` connector holding a short customer handbook, synced
at once (which indexes it, as every sync does), and an index of every other demo dataset, so the demo
workspace can answer questions about its data with citations. Idempotent."""
from __future__ import annotations

from typing import Any

from chalicelib.core import aws
from chalicelib.core.authz import Principal
from chalicelib.core.ids import new_id
from chalicelib.core.tenancy import workspace_scope
from chalicelib.gateway import models
from chalicelib.gateway.ingest import connectors, sync, sync_worker
from chalicelib.gateway.ingest.sources import documents
from chalicelib.knowledge import indexer

DATASET = "handbook"
DOCS = {
    "returns-policy.md": (
        "# Returns policy\n\n"
        "Customers may return any order within 30 days of delivery for a full refund. "
        "Refunds are paid to the original payment method within 5 business days.\n\n"
        "Orders on the enterprise plan can be returned within 60 days. "
        "Refunded orders keep the status refunded in the orders dataset.\n"),
    "plans.md": (
        "# Plans\n\n"
        "The free plan includes one workspace and community support. "
        "The team plan adds shared dashboards and e-mail support within one business day.\n\n"
        "The enterprise plan adds single sign-on, a named account manager and support within four hours.\n"),
}
QUESTION = "How long do customers have to return an order?"


def seed(workspace_id: str, region: str, principal: Principal) -> dict[str, Any]:
    scope = workspace_scope(workspace_id, principal)
    existing = {c.dataset_name: c for c in models.connectors(region).query(workspace_id)}
    conn = existing.get(DATASET)
    if conn is None:
        created = connectors.create_connector(scope, {
            "name": "Demo customer handbook", "kind": "documents", "dataset_name": DATASET,
            "description": "Demo documents: returns policy and plans (synthetic).", "config": {}}, None)
        conn = models.connectors(region).get(workspace_id, created["id"])
        s3 = aws.client("s3", region)
        for name, text in DOCS.items():
            key = documents.prefix(workspace_id, conn.id) + f"{new_id('doc')}/{name}"
            s3.put_object(Bucket=aws.bucket_name(documents.BUCKET, region), Key=key, Body=text.encode(),
                          ContentType="text/markdown")
        run = sync.request_sync(scope, conn.id, mode="FULL_REFRESH", idempotency_key=f"demo-seed-{conn.id}")
        sync_worker.run_sync(workspace_id, run["id"], attempt=1)
    indexed = {}
    for ds in models.datasets(region).query(workspace_id):  # the demo's policies were set after its syncs
        indexed[ds.name] = indexer.index_dataset(region, workspace_id, ds.id)
    return {"connector_id": conn.id, "indexed_chunks": indexed, "question": QUESTION}
