"""Datasets written as the sync worker writes them (with the internal ``_key`` column), for retrieval tests."""
from __future__ import annotations

from typing import Any

from tests.functional.gateway.data import field, put_dataset


def put_keyed(workspace_id: str, region: str, name: str, fields: list[dict[str, Any]], rows: list[tuple],
              **kw: Any) -> str:
    return put_dataset(workspace_id, region, name, [field("_key")] + fields,
                       [(f"{name}-{i}",) + tuple(r) for i, r in enumerate(rows, start=1)], **kw)
