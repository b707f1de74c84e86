"""The catalog snapshot as an object in S3, so a new container's first read does not reload the catalog.

A container that loads a workspace's catalog in full from DynamoDB writes what it loaded (the normalised
dataset records and the connectors, tagged with the catalog version read before the load and the time of
the load) to ``<workspace>/catalog/snapshot.json.gz`` in the region's ``data`` bucket (KMS-encrypted, as
the datasets' Parquet). A container without a snapshot of its own reads that object first
(``catalog.snapshot``): when its version is the stored one it is used as it is; when the version log
still names every change since, only those datasets and connectors are read again; when the object is
missing, unreadable, of another workspace, newer than the stored version, older than the full-reload
safety net, or behind a gap in the log, the catalog is loaded in full (and the object rewritten).
The object holds what the DynamoDB items hold, in the same region; nothing in it is trusted beyond
what a full load would give (every reader still applies the caller's permissions).
"""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from chalicelib.core import aws

BUCKET = "data"
FORMAT = 1
# The record fields stored (the derived search fields are rebuilt on load).
RECORD_FIELDS = ("id", "workspace_id", "name", "connector_id", "owner", "description", "fields", "acl", "data_prefix",
                 "row_count", "schema_version", "last_synced_at", "created_at", "updated_at", "classification")


@dataclass
class Stored:
    """A snapshot object as read: the catalog version it reflects, when it was loaded, its contents."""

    version: int
    loaded_at: float
    records: list[dict[str, Any]]
    connectors: dict[str, dict[str, Any]]


def key_of(workspace_id: str) -> str:
    return f"{workspace_id}/catalog/snapshot.json.gz"


def write(region: str, workspace_id: str, version: int, loaded_at: float, records: list[Any],
          connectors: dict[str, dict[str, Any]]) -> None:
    """Store a full load (records in paging order) for the next new container."""
    doc = {"format": FORMAT, "workspace_id": workspace_id, "version": version, "loaded_at": loaded_at,
           "records": [[getattr(r, name) for name in RECORD_FIELDS] for r in records], "connectors": connectors}
    body = gzip.compress(json.dumps(doc, separators=(",", ":"), default=str).encode("utf-8"), compresslevel=3)
    aws.client("s3", region).put_object(Bucket=aws.bucket_name(BUCKET, region), Key=key_of(workspace_id), Body=body,
                                        ServerSideEncryption="aws:kms", SSEKMSKeyId=aws.key_alias("data"))


def read(region: str, workspace_id: str) -> Stored | None:
    """The workspace's snapshot object, or None when there is none usable (missing, malformed, another
    workspace's, another format)."""
    try:
        body = aws.client("s3", region).get_object(Bucket=aws.bucket_name(BUCKET, region),
                                                   Key=key_of(workspace_id))["Body"].read()
        doc = json.loads(gzip.decompress(body))
    except ClientError:
        return None
    except (OSError, ValueError, EOFError):
        return None
    if (not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("workspace_id") != workspace_id
            or not isinstance(doc.get("version"), int) or not isinstance(doc.get("records"), list)
            or not isinstance(doc.get("connectors"), dict) or not isinstance(doc.get("loaded_at"), (int, float))):
        return None
    records = []
    for row in doc["records"]:
        if not isinstance(row, list) or len(row) != len(RECORD_FIELDS):
            return None
        rec = dict(zip(RECORD_FIELDS, row, strict=True))
        if rec["workspace_id"] != workspace_id:
            return None
        records.append(rec)
    return Stored(doc["version"], float(doc["loaded_at"]), records, doc["connectors"])
