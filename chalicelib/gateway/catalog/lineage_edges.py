"""Writing lineage edges (the ingestion side): connector -> dataset, idempotent by edge key."""
from __future__ import annotations

import json
from typing import Any

from pynamodb.exceptions import DeleteError, PutError

from chalicelib.core import clock
from chalicelib.gateway import models


def edge_key(source_id: str, target_id: str) -> str:
    return f"{source_id}>{target_id}"


def record_edge(region: str, workspace_id: str, source_id: str, source_type: str, target_id: str,
                target_type: str, details: dict[str, Any] | None = None) -> bool:
    """Store the edge once; True when it is new (a repeat changes nothing)."""
    cls = models.lineage_edges(region)
    try:
        cls(workspace_id, edge_key(source_id, target_id), source_id=source_id, source_type=source_type,
            target_id=target_id, target_type=target_type, created_at=clock.iso(),
            details=json.dumps(details or {})).save(condition=cls.edge.does_not_exist())
        return True
    except PutError:
        return False


def remove_edge(region: str, workspace_id: str, source_id: str, target_id: str) -> None:
    try:
        models.lineage_edges(region)(workspace_id, edge_key(source_id, target_id)).delete()
    except DeleteError:
        pass
