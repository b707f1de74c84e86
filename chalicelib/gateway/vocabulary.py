"""The gateway's enumerations, shared by the ingestion side (connectors, sync) and the read side
(catalog, policies, GraphQL). Values are UPPER_SNAKE so they are GraphQL enum values as they are."""
from __future__ import annotations

# Connector kinds and the category of source each reads: the one declaration. Every other list (the
# sources' modules, the OpenAPI and GraphQL enums) is derived from it or checked against it by
# tests/unit/gateway/test_vocabulary.py.
CONNECTOR_KINDS: dict[str, str] = {"s3": "STORAGE", "dynamodb": "DATABASE", "http": "API", "documents": "DOCUMENTS"}
KINDS: tuple[str, ...] = tuple(CONNECTOR_KINDS)

# Category: what kind of source a connector reads (one per kind).
CATEGORY_OF_KIND: dict[str, str] = dict(CONNECTOR_KINDS)
CATEGORIES: tuple[str, ...] = tuple(dict.fromkeys(CONNECTOR_KINDS.values()))

# Status: a connector's health. SYNCING while a sync holds its lease; PAUSED when an admin paused it.
STATUSES: tuple[str, ...] = ("HEALTHY", "DEGRADED", "FAILING", "SYNCING", "PAUSED")

# IngestionMode: what a sync reads.
INGESTION_MODES: tuple[str, ...] = ("INCREMENTAL", "FULL_REFRESH")

# SyncRun status. QUEUED -> RUNNING -> SUCCEEDED | FAILED; a failed attempt that will be retried is
# RETRYING with ``error`` set (then RUNNING again); a permanent error is FAILED at once.
SYNC_STATUSES: tuple[str, ...] = ("QUEUED", "RUNNING", "RETRYING", "SUCCEEDED", "FAILED")

# Field types of a normalised dataset schema. JSON columns hold JSON text (Parquet VARCHAR).
FIELD_TYPES: tuple[str, ...] = ("STRING", "INTEGER", "FLOAT", "BOOLEAN", "TIMESTAMP", "DATE", "JSON")
# The DuckDB/Parquet type that stores each field type (TIMESTAMP is UTC without a zone).
DUCKDB_TYPES: dict[str, str] = {"STRING": "VARCHAR", "INTEGER": "BIGINT", "FLOAT": "DOUBLE", "BOOLEAN": "BOOLEAN",
                                "TIMESTAMP": "TIMESTAMP", "DATE": "DATE", "JSON": "VARCHAR"}

# Classification, lowest to highest; a dataset's classification is the highest of its fields.
CLASSIFICATIONS: tuple[str, ...] = ("PUBLIC", "INTERNAL", "CONFIDENTIAL", "PII")

# FieldPolicy: what a reader sees of a field.
FIELD_POLICIES: tuple[str, ...] = ("ALLOW", "MASK", "HASH", "REDACT", "DENY")
DEFAULT_POLICY: dict[str, str] = {"PII": "MASK", "CONFIDENTIAL": "ALLOW", "INTERNAL": "ALLOW", "PUBLIC": "ALLOW"}

# Lineage node types written by the ingestion side.
LINEAGE_CONNECTOR = "connector"
LINEAGE_DATASET = "dataset"


def highest_classification(values: list[str]) -> str:
    """The highest classification among ``values`` (INTERNAL when there are none)."""
    ranks = [CLASSIFICATIONS.index(v) for v in values if v in CLASSIFICATIONS]
    return CLASSIFICATIONS[max(ranks)] if ranks else "INTERNAL"
