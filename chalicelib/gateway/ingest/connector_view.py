"""The public shape of a connector, as every role sees it: no secret, a URL without query values or user
info, and the ExternalId its role must require. Read by the connector routes and the catalog."""
from __future__ import annotations

import json
from typing import Any

from pynamodb.exceptions import DoesNotExist

from chalicelib.gateway import models
from chalicelib.gateway.ingest import source_access
from chalicelib.gateway.ingest.sources import module
from chalicelib.gateway.ingest.sources.http_api import public_url
from chalicelib.gateway.vocabulary import ROLE_KINDS


def _public_config(kind: str, stored: dict[str, Any]) -> dict[str, Any]:
    """The config as every role sees it: no secret, and a URL without its query values or user info."""
    secret_names = set(module(kind).SECRETS)
    out = {k: v for k, v in stored.items() if k not in secret_names}
    if isinstance(out.get("url"), str):
        out["url"] = public_url(out["url"])
    out["secrets_set"] = sorted(k for k in secret_names if k in stored)
    return out


def to_dict(item: models.ConnectorAttrs, region: str) -> dict[str, Any]:
    """The public shape of a connector (never a secret) stored in ``region``."""
    last_sync = None
    if item.last_sync_id:
        last_sync = {"id": item.last_sync_id, "status": None, "finished_at": None}
        try:
            run = models.sync_runs(region).get(item.workspace_id, item.last_sync_id)
            last_sync.update(status=run.status, finished_at=run.finished_at)
        except DoesNotExist:
            pass
    return {
        "id": item.id,
        "name": item.name,
        "kind": item.kind,
        "category": item.category,
        "status": item.status,
        "description": item.description or "",
        "health": {"last_checked_at": item.last_checked_at, "last_error": item.last_error},
        "last_sync": last_sync,
        "dataset": {"id": item.dataset_id, "name": item.dataset_name},
        "owner": item.owner,
        "config": _public_config(item.kind, json.loads(item.config or "{}")),
        # what the workspace's role must require in its trust policy (kinds read through a role)
        "external_id": source_access.external_id(item.workspace_id) if item.kind in ROLE_KINDS else None,
        "created_at": item.created_at,
        "updated_at": item.updated_at,
    }
