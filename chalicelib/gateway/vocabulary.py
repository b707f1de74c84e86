"""The gateway's enumerations, shared by the ingestion side (connectors, sync) and the read side
(catalog, policies, GraphQL). Values are UPPER_SNAKE so they are GraphQL enum values as they are."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConnectorKind:
    """A kind of connector: what it reads, where its reader lives, and how the gateway reaches the source."""

    name: str
    category: str  # what kind of source it reads (``CATEGORIES``)
    module: str  # its reader: ``chalicelib/gateway/ingest/sources/<module>.py`` (``sources.SourceReader``)
    access: str  # "role": as a role the workspace grants (ingest/source_access.py); "url": an outbound
    #              request to a checked address; "upload": files uploaded into the platform's own bucket


# Connector kinds: the one declaration. Every other list (the readers' modules, the OpenAPI and GraphQL
# enums, which kinds need a role grant) is derived from it or checked against it by
# tests/unit/gateway/test_vocabulary.py.
CONNECTOR_KINDS: dict[str, ConnectorKind] = {k.name: k for k in (
    ConnectorKind("s3", "STORAGE", "s3_objects", "role"),
    ConnectorKind("dynamodb", "DATABASE", "dynamodb_table", "role"),
    ConnectorKind("http", "API", "http_api", "url"),
    ConnectorKind("documents", "DOCUMENTS", "documents", "upload"),
)}
KINDS: tuple[str, ...] = tuple(CONNECTOR_KINDS)
ROLE_KINDS: tuple[str, ...] = tuple(k for k, v in CONNECTOR_KINDS.items() if v.access == "role")

# Category: what kind of source a connector reads (one per kind).
CATEGORY_OF_KIND: dict[str, str] = {k: v.category for k, v in CONNECTOR_KINDS.items()}
CATEGORIES: tuple[str, ...] = tuple(dict.fromkeys(CATEGORY_OF_KIND.values()))

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
