"""Connectors: create, read, edit and delete, with config validated per kind and secrets encrypted.

A connector feeds exactly one dataset. Its id and name are fixed at creation (``dataset_name`` is the
table name in federated SQL); the dataset itself is written by the first successful sync.
Every function takes the request's ``RequestScope``; a connector of another workspace answers 404.
"""
from __future__ import annotations

import json
import re
from typing import Any

from pynamodb.exceptions import DeleteError, DoesNotExist, PutError, UpdateError

from chalicelib.core import audit, clock
from chalicelib.core.audit import Actor
from chalicelib.core.http.errors import ApiError, conflict, not_found, validation_error
from chalicelib.core.http.validation import F, validate
from chalicelib.core.ids import is_id, new_id
from chalicelib.core.store import revocation_ledger
from chalicelib.core.tenancy import RequestScope
from chalicelib.gateway import models, storage
from chalicelib.gateway.catalog import lineage_edges
from chalicelib.gateway.catalog import service as catalog
from chalicelib.gateway.ingest import secrets, source_names
from chalicelib.gateway.ingest.connector_view import to_dict
from chalicelib.gateway.ingest.sources import SourceError, Src, documents, module
from chalicelib.gateway.vocabulary import CATEGORIES, CATEGORY_OF_KIND, KINDS, STATUSES

NAME_MAX = 120
DATASET_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
SECRET_MARK = "$secret"  # how a stored connector config holds a secret: {"$secret": ciphertext}


def sealed_secrets(config_json: str | None) -> dict[str, str]:
    """Field name -> ciphertext of every secret in a stored connector config."""
    stored = json.loads(config_json or "{}")
    return {name: value[SECRET_MARK] for name, value in stored.items()
            if isinstance(value, dict) and isinstance(value.get(SECRET_MARK), str)}
MAX_CONNECTORS = 200  # per workspace

CREATE_FIELDS = {
    "name": F(str, required=True, min_len=1, max_len=NAME_MAX),
    "kind": F(str, required=True, enum=KINDS),
    "config": F(dict, required=True),
    "dataset_name": F(str, max_len=63),
    "description": F(str, max_len=2000),
}
UPDATE_FIELDS = {
    "name": F(str, min_len=1, max_len=NAME_MAX),
    "config": F(dict),
    "description": F(str, max_len=2000),
    "paused": F(bool),
}


def _dataset_name_default(name: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    if not slug or not slug[0].isalpha():
        slug = "ds_" + slug
    return slug[:63].rstrip("_") or "dataset"


def _validate_config(kind: str, config: dict[str, Any], region: str) -> dict[str, Any]:
    """The config in canonical form (``sources.<kind>.canonical``), or a 400 listing every bad config
    field (fields are reported as ``config.<name>``)."""
    mod = module(kind)
    try:
        validate(config, mod.FIELDS)
    except ApiError as err:
        raise validation_error([{"field": f"config.{e['field']}", "message": e["message"]}
                                for e in (err.errors or [])]) from None
    problems = mod.check_config(config) if hasattr(mod, "check_config") else []
    if hasattr(mod, "canonical"):
        try:
            config = mod.canonical(config, region)
        except source_names.Refused as refused:
            problems = [refused.problem, *problems]
    if problems:
        raise validation_error([{"field": f"config.{p['field']}", "message": p["message"]} for p in problems])
    return config


def _seal(region: str, workspace_id: str, connector_id: str, kind: str, config: dict[str, Any],
          previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """Config as stored: secret fields replaced by ``{"$secret": ciphertext}``; kept from ``previous``
    when an update does not resend them."""
    stored = dict(config)
    for name in module(kind).SECRETS:
        if name in config and config[name] is not None:
            stored[name] = {SECRET_MARK: secrets.encrypt(region, workspace_id, connector_id, config[name])}
        elif previous and name in previous and name not in config:
            stored[name] = previous[name]
        else:
            stored.pop(name, None)
    return stored


def open_config(item: models.ConnectorAttrs, region: str) -> dict[str, Any]:
    """The connector's config with secrets decrypted (for readers only; never returned to callers)."""
    stored = json.loads(item.config or "{}")
    for name in module(item.kind).SECRETS:
        value = stored.get(name)
        if isinstance(value, dict) and SECRET_MARK in value:
            stored[name] = secrets.decrypt(region, item.workspace_id, item.id, value[SECRET_MARK])
    return stored


def source_of(item: models.ConnectorAttrs, region: str) -> Src:
    return Src(region=region, workspace_id=item.workspace_id, connector_id=item.id, config=open_config(item, region))


def load(scope: RequestScope, connector_id: str) -> tuple[models.ConnectorAttrs, str]:
    """The connector item of the scope's workspace and the region, or 404."""
    if not is_id(connector_id, "conn"):
        raise not_found("connector")
    region = scope.home
    try:
        return models.connectors(region).get(scope.workspace_id, connector_id, consistent_read=True), region
    except DoesNotExist:
        raise not_found("connector") from None


def list_connectors(scope: RequestScope, *, status: str | None = None, category: str | None = None) -> list[dict]:
    """The workspace's connectors (name order), optionally filtered by status and category."""
    errors = []
    if status is not None and status not in STATUSES:
        errors.append({"field": "status", "message": "must be one of " + ", ".join(STATUSES)})
    if category is not None and category not in CATEGORIES:
        errors.append({"field": "category", "message": "must be one of " + ", ".join(CATEGORIES)})
    if errors:
        raise validation_error(errors)
    region = scope.home
    items = [c for c in models.connectors(region).query(scope.workspace_id)
             if (status is None or c.status == status) and (category is None or c.category == category)]
    items.sort(key=lambda c: (c.name.lower(), c.id))
    return [to_dict(c, region) for c in items]


def get_connector(scope: RequestScope, connector_id: str) -> dict:
    item, region = load(scope, connector_id)
    return to_dict(item, region)


def _dataset_name_taken(region: str, workspace_id: str, name: str, exclude_connector: str | None = None) -> bool:
    for ds in models.datasets(region).query(workspace_id):
        if ds.name == name and ds.connector_id != exclude_connector:
            return True
    for c in models.connectors(region).query(workspace_id):
        if c.dataset_name == name and c.id != exclude_connector:
            return True
    return False


def health_check(item: models.ConnectorAttrs, region: str) -> str | None:
    """Probe the source; returns the error text (or None) after recording it on the connector."""
    try:
        module(item.kind).health(source_of(item, region))
        error = None
    except SourceError as err:
        error = str(err)[:500]
    except Exception as err:  # an unexpected failure is still a health result, without internals
        error = f"health check failed ({type(err).__name__})"
    now = clock.iso()
    actions = [models.ConnectorAttrs.last_checked_at.set(now)]
    actions.append(models.ConnectorAttrs.last_error.set(error) if error else models.ConnectorAttrs.last_error.remove())
    if item.status not in ("SYNCING", "PAUSED"):
        actions.append(models.ConnectorAttrs.status.set("FAILING" if error else "HEALTHY"))
    try:
        item.update(actions=actions)
    except UpdateError:
        return error
    catalog.changed(region, item.workspace_id, connectors=[item.id])  # a dataset's ``source`` shows the health
    return error


def check_connector(scope: RequestScope, connector_id: str) -> dict:
    """Probe the connector's source now (assume the role, list or describe it) and record the result."""
    item, region = load(scope, connector_id)
    health_check(item, region)
    item.refresh(consistent_read=True)
    return to_dict(item, region)


def create_connector(scope: RequestScope, body: Any, caller: Any) -> dict:
    """Validate, store (secrets encrypted), health-check and audit a new connector."""
    body = validate(body, CREATE_FIELDS)
    kind = body["kind"]
    region = scope.home
    body["config"] = _validate_config(kind, body["config"], region)
    dataset_name = body.get("dataset_name") or _dataset_name_default(body["name"])
    if not DATASET_NAME_RE.match(dataset_name):
        raise validation_error([{"field": "dataset_name",
                                 "message": "must start with a letter and hold only a-z, 0-9 and _ (at most 63)"}])
    cls = models.connectors(region)
    if cls.count(scope.workspace_id) >= MAX_CONNECTORS:
        raise ApiError(422, "connector_limit", f"A workspace can have at most {MAX_CONNECTORS} connectors.")
    if _dataset_name_taken(region, scope.workspace_id, dataset_name):
        raise conflict("dataset_name_taken", f"A dataset named '{dataset_name}' already exists in this workspace.")
    connector_id = new_id("conn")
    now = clock.iso()
    item = cls(scope.workspace_id, connector_id, name=body["name"], kind=kind, category=CATEGORY_OF_KIND[kind],
               config=json.dumps(_seal(region, scope.workspace_id, connector_id, kind, body["config"])),
               status="HEALTHY", created_at=now, updated_at=now, dataset_id=new_id("ds"),
               dataset_name=dataset_name, created_by=scope.principal.user_id, owner=scope.principal.email,
               description=body.get("description", ""))
    try:
        item.save(condition=cls.id.does_not_exist())
    except PutError:
        raise ApiError(503, "unavailable", "The connector could not be stored; try again.") from None
    if hasattr(module(kind), "prepare"):
        module(kind).prepare(source_of(item, region))
    health_check(item, region)
    item.refresh(consistent_read=True)
    audit.append(region, scope.workspace_id, "connector.created", actor=Actor.of(scope.principal),
                 target={"type": "connector", "id": connector_id},
                 details={"name": item.name, "kind": kind, "dataset_name": dataset_name}, caller=caller)
    return to_dict(item, region)


def update_connector(scope: RequestScope, connector_id: str, body: Any, caller: Any) -> dict:
    """Change name, description or config (secrets kept unless resent), or pause/resume."""
    body = validate(body, UPDATE_FIELDS)
    item, region = load(scope, connector_id)
    if not body:
        raise validation_error([{"field": "body", "message": "must change at least one field"}])
    new_config = None
    if "config" in body:
        previous = json.loads(item.config or "{}")
        merged = {k: v for k, v in previous.items() if k not in module(item.kind).SECRETS}
        merged.update(body["config"])
        for name in module(item.kind).SECRETS:  # kept secrets satisfy "required" without being resent
            if name in previous and name not in merged:
                merged[name] = "(kept)"
        merged = _validate_config(item.kind, merged, region)
        for name in module(item.kind).SECRETS:
            if merged.get(name) == "(kept)" and name not in body["config"]:
                merged.pop(name)
        new_config = _seal(region, item.workspace_id, item.id, item.kind, merged, previous)
    actions = [models.ConnectorAttrs.updated_at.set(clock.iso())]
    if "name" in body:
        actions.append(models.ConnectorAttrs.name.set(body["name"]))
    if "description" in body:
        actions.append(models.ConnectorAttrs.description.set(body["description"]))
    if new_config is not None:
        actions.append(models.ConnectorAttrs.config.set(json.dumps(new_config)))
    if body.get("paused") is True:
        actions.append(models.ConnectorAttrs.status.set("PAUSED"))
    elif body.get("paused") is False and item.status == "PAUSED":
        actions.append(models.ConnectorAttrs.status.set("HEALTHY"))
    try:
        item.update(actions=actions, condition=models.ConnectorAttrs.id.exists())
    except UpdateError:
        raise not_found("connector") from None
    if new_config is not None:
        _record_dropped_secrets(item, previous, new_config, scope.principal.user_id)
    catalog.changed(region, scope.workspace_id, connectors=[connector_id])
    if new_config is not None or body.get("paused") is False:
        health_check(item, region)
        item.refresh(consistent_read=True)
    audit.append(region, scope.workspace_id, "connector.updated", actor=Actor.of(scope.principal),
                 target={"type": "connector", "id": connector_id},
                 details={"fields": sorted(body), "config_fields": sorted((body.get("config") or {}).keys())},
                 caller=caller)
    return to_dict(item, region)


def _record_dropped_secrets(item: models.ConnectorAttrs, before: dict[str, Any], after: dict[str, Any],
                            user_id: str) -> None:
    """Ledger entries for the stored secrets ``before`` holds and ``after`` no longer does, so that no
    restore of an older backup brings a replaced (or deleted) credential back into use."""
    kept = set(sealed_secrets(json.dumps(after)).values())
    now = clock.iso()
    for cipher in sealed_secrets(json.dumps(before)).values():
        if cipher not in kept:
            revocation_ledger.record(str(type(item).Meta.region), item.workspace_id,
                                     revocation_ledger.CONNECTOR_SECRET,
                                     revocation_ledger.secret_ref(item.id, cipher), now, user_id)


def delete_connector(scope: RequestScope, connector_id: str, caller: Any) -> dict:
    """Delete a connector with its dataset (catalog entry and data objects) and its lineage edges.
    Refused with 409 while a sync holds the connector's lease. Sync runs stay as history."""
    item, region = load(scope, connector_id)
    cls = models.connectors(region)
    now = clock.now()
    try:
        item.delete(condition=cls.lock_owner.does_not_exist() | (cls.lock_expires_at < int(now)))
    except DeleteError:
        raise conflict("sync_in_progress", "A sync of this connector is running; delete it when it ends.") from None

    _record_dropped_secrets(item, json.loads(item.config or "{}"), {}, scope.principal.user_id)
    removed_objects = 0
    if item.dataset_id:
        try:
            models.datasets(region).get(item.workspace_id, item.dataset_id).delete()
        except DoesNotExist:
            pass
        removed_objects = storage.delete_dataset_data(region, item.workspace_id, item.dataset_id)
        lineage_edges.remove_edge(region, item.workspace_id, item.id, item.dataset_id)
    catalog.changed(region, item.workspace_id, connectors=[item.id], datasets=[item.dataset_id] if item.dataset_id else [])
    if hasattr(module(item.kind), "cleanup"):
        removed_objects += module(item.kind).cleanup(Src(region, item.workspace_id, item.id, {}))
    audit.append(region, scope.workspace_id, "connector.deleted", actor=Actor.of(scope.principal),
                 target={"type": "connector", "id": connector_id},
                 details={"name": item.name, "dataset_id": item.dataset_id, "objects_removed": removed_objects},
                 caller=caller)
    return {"id": connector_id, "deleted": True}




def create_upload(scope: RequestScope, connector_id: str, body: Any, caller: Any) -> dict:
    """A presigned PUT URL for one document of a ``documents`` connector (409 for other kinds)."""

    body = validate(body, documents.UPLOAD_FIELDS)
    if not documents.FILENAME_RE.match(body["file_name"]):
        raise validation_error([{"field": "file_name",
                                 "message": "must be a plain file name (letters, digits, . _ - and spaces)"}])
    item, region = load(scope, connector_id)
    if item.kind != "documents":
        raise conflict("not_a_documents_connector", "Uploads are only accepted by documents connectors.")
    upload = documents.presign_upload(Src(region, item.workspace_id, item.id, {}), body["file_name"],
                                      body.get("content_type"))
    audit.append(region, scope.workspace_id, "connector.upload_created", actor=Actor.of(scope.principal),
                 target={"type": "connector", "id": connector_id},
                 details={"document_id": upload["document_id"], "file_name": body["file_name"]}, caller=caller)
    return upload
