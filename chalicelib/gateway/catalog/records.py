"""A catalog row as the read side holds it: ``DatasetRecord``, normalised from the stored item (upper-case
enumerations of ``gateway/vocabulary.py``, parsed JSON, an unknown classification read as CONFIDENTIAL and an
unknown policy as DENY: failing towards safety), with what matching and paging need precomputed."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from chalicelib.core import clock
from chalicelib.gateway import models
from chalicelib.gateway.vocabulary import CLASSIFICATIONS, FIELD_POLICIES, FIELD_TYPES

ACL_TYPES = ("role", "user", "group")  # group: a workspace group (grp_...), matched by its members


@dataclass
class DatasetRecord:
    """One catalog row, normalised (upper-case enums, parsed JSON)."""

    id: str
    workspace_id: str
    name: str
    connector_id: str | None
    owner: str
    description: str
    fields: list[dict[str, Any]]
    acl: list[dict[str, str]]
    data_prefix: str | None
    row_count: int
    schema_version: int
    last_synced_at: str | None
    created_at: str
    updated_at: str
    classification: str
    _haystack: str = field(default="", repr=False)
    acl_keys: frozenset[str] = field(default=frozenset(), repr=False)  # "role:<id>" / "user:<id>"
    fresh_since: float = 0.0  # epoch seconds of last_synced_at (created_at when never synced)
    row_acl: dict[str, list[dict[str, str]]] = field(default_factory=dict, repr=False)  # document id -> acl
    # the documents hidden from each ACL key set (``gateway/reader.hidden_rows``), for this record's life
    hidden_memo: dict[frozenset[str], frozenset[str]] = field(default_factory=dict, repr=False)
    region: str = ""  # the region holding the dataset (its workspace's), where it was read from



def norm_field(raw: dict[str, Any]) -> dict[str, Any]:
    cls = str(raw.get("classification") or "INTERNAL").upper()
    pol = str(raw.get("policy") or "ALLOW").upper()
    typ = str(raw.get("type") or "STRING").upper()
    return {
        "name": str(raw.get("name", "")),
        "type": typ if typ in FIELD_TYPES else "STRING",
        "nullable": bool(raw.get("nullable", True)),
        "classification": cls if cls in CLASSIFICATIONS else "CONFIDENTIAL",  # unknown: fail towards safety
        "policy": pol if pol in FIELD_POLICIES else "DENY",
        "description": str(raw.get("description") or ""),
    }


def highest(classes: list[str], default: str = "INTERNAL") -> str:
    if not classes:
        return default
    return max(classes, key=CLASSIFICATIONS.index)


def to_record(item: models.DatasetAttrs, region: str) -> DatasetRecord:
    """The record of a catalog item read in ``region``."""
    fields = [norm_field(f) for f in json.loads(item.schema or "[]") if isinstance(f, dict) and f.get("name")]
    acl = [{"type": str(a.get("type", "")).lower(), "id": str(a.get("id", ""))}
           for a in json.loads(item.acl or "[]")
           if isinstance(a, dict) and str(a.get("type", "")).lower() in ACL_TYPES]
    stored = str(item.classification or "INTERNAL").upper()
    rec = DatasetRecord(
        id=item.id, workspace_id=item.workspace_id, name=item.name, connector_id=item.connector_id,
        owner=item.owner, description=item.description or "", fields=fields, acl=acl,
        data_prefix=item.data_prefix, row_count=int(item.row_count or 0),
        schema_version=int(item.schema_version or 0), last_synced_at=item.last_synced_at,
        created_at=item.created_at, updated_at=item.updated_at, region=region,
        classification=highest([f["classification"] for f in fields],
                               stored if stored in CLASSIFICATIONS else "INTERNAL"),
    )
    rec.acl_keys = frozenset(f"{a['type']}:{a['id']}" for a in acl)
    rec.row_acl = parse_row_acl(getattr(item, "row_acl", None))
    rec.fresh_since = clock.parse_iso(rec.last_synced_at or rec.created_at).timestamp()
    return rec


def parse_row_acl(raw: str | None) -> dict[str, list[dict[str, str]]]:
    """Per-document ACLs (``gateway/reader``); an ACL that is not a list admits nobody but Admins."""
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        value = {}
    if not isinstance(value, dict):
        return {}
    return {str(doc): [{"type": str(a.get("type", "")), "id": str(a.get("id", ""))}
                       for a in (acl if isinstance(acl, list) else []) if isinstance(a, dict)]
            for doc, acl in value.items()}


def with_haystack(rec: DatasetRecord) -> DatasetRecord:
    """The record with the text search matches: name, description and the field names non-admins see."""
    rec._haystack = " ".join([rec.name, rec.description]
                             + [f["name"] for f in rec.fields if f["policy"] != "DENY"]).lower()
    return rec


def order_key(rec: DatasetRecord) -> tuple[str, str]:
    """The paging order: by name, then id."""
    return rec.name, rec.id


def record_of_stored(raw: dict[str, Any], region: str) -> DatasetRecord:
    """A record from its fields as a stored snapshot object of ``region`` holds them (``catalog/snapshots.py``)."""
    rec = DatasetRecord(**raw, region=region)
    rec.acl_keys = frozenset(f"{a['type']}:{a['id']}" for a in rec.acl)
    rec.fresh_since = clock.parse_iso(rec.last_synced_at or rec.created_at).timestamp()
    return rec
