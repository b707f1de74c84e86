"""Gateway storage (regional: the workspace's region). Shared by the connector/sync side and the
catalog/query side; JSON-valued attributes are documented where they are written."""
from __future__ import annotations

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.indexes import AllProjection, LocalSecondaryIndex

from chalicelib.core.store.tables import BaseModel, regional


class ConnectorAttrs(BaseModel):
    TABLE = "connectors"
    workspace_id = UnicodeAttribute(hash_key=True)
    id = UnicodeAttribute(range_key=True)  # conn_...
    name = UnicodeAttribute()
    kind = UnicodeAttribute()  # s3 | dynamodb | http | documents
    category = UnicodeAttribute()  # STORAGE | DATABASE | API | DOCUMENTS (gateway/vocabulary.py)
    config = UnicodeAttribute(default="{}")  # JSON, secrets encrypted with the region's data key
    status = UnicodeAttribute(default="HEALTHY")  # HEALTHY | DEGRADED | FAILING | SYNCING | PAUSED
    cursor = UnicodeAttribute(null=True)  # incremental sync position (JSON)
    last_checked_at = UnicodeAttribute(null=True)
    last_error = UnicodeAttribute(null=True)
    last_sync_id = UnicodeAttribute(null=True)
    lock_owner = UnicodeAttribute(null=True)  # sync id holding the one-sync-at-a-time lock
    lock_expires_at = NumberAttribute(null=True)
    created_at = UnicodeAttribute()
    updated_at = UnicodeAttribute()
    # the one dataset this connector feeds, and who created the connector
    dataset_id = UnicodeAttribute(null=True)  # ds_..., allocated at creation, written at the first sync
    dataset_name = UnicodeAttribute(null=True)  # the dataset's (SQL table) name
    created_by = UnicodeAttribute(null=True)  # usr_...
    owner = UnicodeAttribute(null=True)  # creator's e-mail; becomes the dataset's owner
    description = UnicodeAttribute(default="")


class DatasetAttrs(BaseModel):
    TABLE = "datasets"
    workspace_id = UnicodeAttribute(hash_key=True)
    id = UnicodeAttribute(range_key=True)  # ds_...
    name = UnicodeAttribute()  # unique per workspace; the table name in federated SQL
    connector_id = UnicodeAttribute(null=True)  # None for derived datasets
    owner = UnicodeAttribute()
    description = UnicodeAttribute(default="")
    classification = UnicodeAttribute(default="INTERNAL")  # PUBLIC | INTERNAL | CONFIDENTIAL | PII
    schema = UnicodeAttribute(default="[]")  # JSON [{name, type, nullable, classification, policy, description}]
    acl = UnicodeAttribute(default="[]")  # JSON [{type: user|role|group, id}]
    # JSON {document_id: [{type: role|user|group, id}]}: per-document ACLs narrowing ``acl`` for those rows
    row_acl = UnicodeAttribute(null=True)
    schema_version = NumberAttribute(default=0)
    schema_drift = UnicodeAttribute(default="[]")  # JSON [{version, at, added, changed}]
    data_prefix = UnicodeAttribute(null=True)  # s3 key prefix of the Parquet parts in the data bucket
    row_count = NumberAttribute(default=0)
    last_synced_at = UnicodeAttribute(null=True)
    created_at = UnicodeAttribute()
    updated_at = UnicodeAttribute()


class SyncRunAttrs(BaseModel):
    TABLE = "sync_runs"
    workspace_id = UnicodeAttribute(hash_key=True)
    id = UnicodeAttribute(range_key=True)  # sync_...
    connector_id = UnicodeAttribute()
    mode = UnicodeAttribute()  # INCREMENTAL | FULL_REFRESH
    status = UnicodeAttribute()  # vocabulary.SYNC_STATUSES
    attempts = NumberAttribute(default=0)
    rows_read = NumberAttribute(default=0)  # so far while RUNNING, then the total
    objects_read = NumberAttribute(default=0)  # objects (S3, documents) or pages (DynamoDB, HTTP) so far
    rows_written = NumberAttribute(default=0)
    error = UnicodeAttribute(null=True)
    requested_by = UnicodeAttribute()
    correlation_id = UnicodeAttribute()
    queued_at = UnicodeAttribute()
    started_at = UnicodeAttribute(null=True)
    finished_at = UnicodeAttribute(null=True)
    dataset_id = UnicodeAttribute(null=True)
    details = UnicodeAttribute(default="{}")  # JSON {rows_deleted, rows_unchanged, schema_version, drift}
    sent_at = NumberAttribute(null=True)  # epoch seconds the sync reaper last re-sent its message


class _ByTarget(LocalSecondaryIndex):
    """Upstream walk: the edges pointing at a node."""

    class Meta:
        index_name = "by_target"
        projection = AllProjection()

    workspace_id = UnicodeAttribute(hash_key=True)
    target_id = UnicodeAttribute(range_key=True)


class LineageEdgeAttrs(BaseModel):
    """One edge ``source -> target`` (connector, dataset, saved query, chat answer, agent run)."""

    TABLE = "lineage_edges"
    workspace_id = UnicodeAttribute(hash_key=True)
    edge = UnicodeAttribute(range_key=True)  # "<source_id>><target_id>"
    source_id = UnicodeAttribute()
    source_type = UnicodeAttribute()
    target_id = UnicodeAttribute()
    target_type = UnicodeAttribute()
    created_at = UnicodeAttribute()
    details = UnicodeAttribute(default="{}")
    expires_at = NumberAttribute(null=True)  # TTL: edges live as long as their subject (chat, run, query day)
    uses = NumberAttribute(null=True)  # aggregated query edges: how many queries of the day took this edge
    by_target = _ByTarget()


class CatalogVersionAttrs(BaseModel):
    """One item per workspace: its catalog version and, under ``c<version>``, what that version changed
    (written and read by gateway/catalog/versions.py)."""

    TABLE = "catalog_versions"
    workspace_id = UnicodeAttribute(hash_key=True)
    version = NumberAttribute(default=0)


def connectors(region: str) -> type[ConnectorAttrs]:
    return regional(ConnectorAttrs, region)


def datasets(region: str) -> type[DatasetAttrs]:
    return regional(DatasetAttrs, region)


def sync_runs(region: str) -> type[SyncRunAttrs]:
    return regional(SyncRunAttrs, region)


def lineage_edges(region: str) -> type[LineageEdgeAttrs]:
    return regional(LineageEdgeAttrs, region)


def catalog_versions(region: str) -> type[CatalogVersionAttrs]:
    return regional(CatalogVersionAttrs, region)
