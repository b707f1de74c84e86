"""Catalog: datasets, their normalised schemas, field policies and ACLs, as the caller may see them.

Read rules (the one place they live; REST, GraphQL, lineage, policies and the query engine use them):

- A dataset is readable when the caller is a workspace Admin, or when an entry of its ``acl`` matches
  one of the caller's roles (``{"type": "role", "id": "member"}``), the caller's user id
  (``{"type": "user", "id": "usr_..."}``) or a group the caller belongs to now (``{"type": "group", "id": "grp_..."}``). Unreadable datasets are never listed, counted or named.
- A field under the ``DENY`` policy does not exist for non-admin callers (not listed, not searchable by
  name or classification, not loaded for queries). Admins see it in the schema with its policy.
- Field policies apply to the *values* for everyone, Admins included; only ``ALLOW`` shows raw values.
- Rows: a dataset's ``row_acl`` (per-document ACLs) hides rows from callers it does not match; the
  policy-enforcing reader (``gateway/reader.py``) applies it, with the rules above, on every content path.

This module is the catalog's front door: the read rules, the ``Dataset`` view, search and field policies
here; the normalised row in ``catalog/records.py``; the per-process snapshot kept current by the catalog
version, and the ``changed`` every writer calls, in ``catalog/snapshot_cache.py`` (their names that callers
use are imported here, so ``catalog.snapshot``, ``catalog.changed``, ... keep one address).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pynamodb.exceptions import UpdateError

from chalicelib.core import audit, clock
from chalicelib.core.audit import Actor
from chalicelib.core.authz import Principal, Role, require
from chalicelib.core.durations import format_duration, parse_duration
from chalicelib.core.http import paging
from chalicelib.core.http.errors import ApiError, not_found, validation_error
from chalicelib.core.store.conditions import condition_failed
from chalicelib.core.tenancy import RequestScope
from chalicelib.gateway import models
from chalicelib.gateway.catalog.records import ACL_TYPES as ACL_TYPES
from chalicelib.gateway.catalog.records import DatasetRecord as DatasetRecord
from chalicelib.gateway.catalog.records import highest as highest
from chalicelib.gateway.catalog.records import norm_field
from chalicelib.gateway.catalog.snapshot_cache import FULL_RELOAD_SECONDS as FULL_RELOAD_SECONDS
from chalicelib.gateway.catalog.snapshot_cache import Change as Change
from chalicelib.gateway.catalog.snapshot_cache import Snapshot as Snapshot
from chalicelib.gateway.catalog.snapshot_cache import change_in as change_in
from chalicelib.gateway.catalog.snapshot_cache import changed as changed
from chalicelib.gateway.catalog.snapshot_cache import checked_alongside as checked_alongside
from chalicelib.gateway.catalog.snapshot_cache import invalidate as invalidate
from chalicelib.gateway.catalog.snapshot_cache import one_version_within as one_version_within
from chalicelib.gateway.catalog.snapshot_cache import snapshot as snapshot
from chalicelib.gateway.catalog.snapshot_cache import stats as stats
from chalicelib.gateway.vocabulary import CLASSIFICATIONS as CLASSIFICATIONS
from chalicelib.gateway.vocabulary import FIELD_POLICIES as FIELD_POLICIES

if TYPE_CHECKING:
    from chalicelib.gateway.catalog.index import CatalogIndex

DEFAULT_PAGE = 25
MAX_PAGE = 100


# --- who may see what -------------------------------------------------------------------------------

def is_admin(principal: Principal) -> bool:
    return Role.ADMIN.value in principal.roles


def principal_keys(principal: Principal) -> frozenset[str]:
    """The ACL entries that match the caller: its roles, its user id and its workspace groups."""
    return frozenset([f"role:{r}" for r in principal.roles] + [f"user:{principal.user_id}"]
                     + [f"group:{g}" for g in principal.groups])


def _acl_admits(principal: Principal, rec: DatasetRecord) -> bool:
    if rec.workspace_id != principal.workspace_id:
        return False
    return is_admin(principal) or not rec.acl_keys.isdisjoint(principal_keys(principal))


def in_scope(principal: Principal, dataset_id: str) -> bool:
    """Whether the principal's dataset scope (``Principal.datasets``) holds the dataset (no scope: yes)."""
    return principal.datasets is None or dataset_id in principal.datasets


def can_read(principal: Principal, rec: DatasetRecord) -> bool:
    """The dataset ACL, narrowed by the principal's dataset scope (a scope never widens the ACL)."""
    return _acl_admits(principal, rec) and in_scope(principal, rec.id)


def visible_fields(principal: Principal, rec: DatasetRecord) -> list[dict[str, Any]]:
    """The fields that exist for the caller: DENY fields are gone for non-admins."""
    if is_admin(principal):
        return [dict(f) for f in rec.fields]
    return [dict(f) for f in rec.fields if f["policy"] != "DENY"]


def snapshot_of(scope: RequestScope, trust_seconds: float | None = None) -> Snapshot:
    """The catalog of the scope's workspace (``snapshot``; 404 for a scope without a workspace)."""
    if not scope.region:
        raise not_found("workspace")
    return snapshot(scope.region, scope.workspace_id, trust_seconds)


def readable(scope: RequestScope, snap: Snapshot | None = None) -> list[DatasetRecord]:
    """Every dataset the scope's caller may read, in paging order (memoised per snapshot and ACL key set)."""
    principal = scope.principal
    snap = snap or snapshot_of(scope)
    keys = frozenset(["*admin*"]) if is_admin(principal) else principal_keys(principal)
    found = snap._readable.get(keys)
    if found is None:
        found = [r for r in snap.ordered if _acl_admits(principal, r)]
        if len(snap._readable) < 256:
            snap._readable[keys] = found
    if principal.datasets is not None:
        return [r for r in found if r.id in principal.datasets]
    return found


def readable_by_name(scope: RequestScope, names: set[str]) -> list[DatasetRecord]:
    """The readable datasets among lower-cased ``names``, sorted by name."""
    principal = scope.principal
    snap = snapshot_of(scope)
    hits = [snap.by_name[n] for n in names if n in snap.by_name]
    return sorted((r for r in hits if can_read(principal, r)), key=lambda r: r.name)


def record(scope: RequestScope, dataset_id: str) -> DatasetRecord:
    """A readable dataset by id; 404 for unknown, unreadable or another workspace's ids."""
    rec = snapshot_of(scope).datasets.get(dataset_id) if isinstance(dataset_id, str) else None
    if rec is None or not can_read(scope.principal, rec):
        raise not_found("dataset")
    return rec


# --- views ------------------------------------------------------------------------------------------

def freshness_seconds(rec: DatasetRecord, now: float | None = None) -> float:
    """Seconds since the last sync (since creation when never synced)."""
    return (clock.now() if now is None else now) - rec.fresh_since


def source_of(rec: DatasetRecord, connectors: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The dataset's connector; a derived dataset (or one whose connector was deleted) gets a
    placeholder connector of kind ``derived`` so the non-null ``source`` holds."""
    if rec.connector_id and rec.connector_id in connectors:
        return connectors[rec.connector_id]
    return {"id": rec.connector_id or f"derived:{rec.id}", "name": "(derived)" if not rec.connector_id else "(deleted)",
            "kind": "derived", "category": "STORAGE", "status": "PAUSED", "description": "", "owner": rec.owner,
            "health": {"last_checked_at": None, "last_error": None}, "last_sync": None,
            "dataset": {"id": rec.id, "name": rec.name}, "config": {},
            "created_at": rec.created_at, "updated_at": rec.updated_at}


def view(scope: RequestScope, rec: DatasetRecord, snap: Snapshot | None = None,
         now: float | None = None) -> dict[str, Any]:
    """The ``Dataset`` shape shared by REST and GraphQL."""
    principal = scope.principal
    snap = snap or snapshot_of(scope)
    return {
        "id": rec.id, "name": rec.name, "description": rec.description,
        "source": source_of(rec, snap.connectors), "owner": rec.owner,
        "freshness": format_duration(freshness_seconds(rec, now)), "last_synced_at": rec.last_synced_at,
        "classification": rec.classification, "schema": visible_fields(principal, rec),
        "acl": [dict(a) for a in rec.acl], "row_count": rec.row_count, "schema_version": rec.schema_version,
        "created_at": rec.created_at, "updated_at": rec.updated_at,
    }


def encode_cursor(rec: DatasetRecord) -> str:
    return paging.encode("datasets", [rec.name, rec.id])


def decode_cursor(cursor: str) -> tuple[str, str]:
    value = paging.decode("datasets", cursor, list)
    if len(value) != 2 or not all(isinstance(v, str) for v in value):
        raise validation_error([{"field": "after", "message": "is not a cursor of this list"}])
    return value[0], value[1]


@dataclass(frozen=True)
class SearchFilters:
    text: str | None = None
    owner: str | None = None
    connector_id: str | None = None
    classification: str | None = None
    fresher_than: str | None = None
    field_classification: str | None = None


def _check_filters(f: SearchFilters) -> float | None:
    errors = []
    max_age = None
    if f.classification is not None and f.classification.upper() not in CLASSIFICATIONS:
        errors.append({"field": "classification", "message": "must be one of " + ", ".join(CLASSIFICATIONS)})
    if f.field_classification is not None and f.field_classification.upper() not in CLASSIFICATIONS:
        errors.append({"field": "field_classification", "message": "must be one of " + ", ".join(CLASSIFICATIONS)})
    if f.fresher_than is not None:
        try:
            max_age = parse_duration(f.fresher_than)
        except ValueError as err:
            errors.append({"field": "fresher_than", "message": str(err)})
    if f.text is not None and len(f.text) > 200:
        errors.append({"field": "search", "message": "must have at most 200 characters"})
    if errors:
        raise validation_error(errors)
    return max_age


@dataclass(frozen=True)
class _Criteria:
    """Search filters normalised for matching one record (lower-cased text terms and owner, upper-cased
    classifications, the freshness bound in seconds)."""
    terms: tuple[str, ...]
    owner: str | None
    connector_id: str | None
    classification: str | None
    field_classification: str | None
    max_age: float | None

    @classmethod
    def of(cls, filters: SearchFilters) -> _Criteria:
        return cls(terms=tuple(t for t in (filters.text or "").lower().split() if t),
                   owner=filters.owner.lower() if filters.owner else None,
                   connector_id=filters.connector_id or None,
                   classification=filters.classification.upper() if filters.classification else None,
                   field_classification=(filters.field_classification.upper()
                                         if filters.field_classification else None),
                   max_age=_check_filters(filters))

    def bitmap(self, index: CatalogIndex, principal: Principal, now: float) -> int:
        """The caller's readable datasets matching every criterion, from the snapshot's index: the same
        answer as ``select`` over ``readable(principal)``, without scanning the catalog."""
        keys = None if is_admin(principal) else principal_keys(principal)
        return index.select(keys=keys, terms=self.terms, classification=self.classification,
                            connector_id=self.connector_id, owner=self.owner,
                            oldest=None if self.max_age is None else now - self.max_age,
                            field_classification=self.field_classification)

    def select(self, records: list[DatasetRecord], *, admin: bool, now: float) -> list[DatasetRecord]:
        """The records matching every criterion, in their order: the definition of a match, one pass per
        criterion (the index answers search; this linear form is its test oracle and bench reference)."""
        out = records
        for term in self.terms:
            out = [r for r in out if term in r._haystack]
        if self.classification:
            out = [r for r in out if r.classification == self.classification]
        if self.connector_id:
            out = [r for r in out if r.connector_id == self.connector_id]
        if self.owner:
            out = [r for r in out if r.owner.lower() == self.owner]
        if self.max_age is not None:
            oldest = now - self.max_age
            out = [r for r in out if r.fresh_since >= oldest]
        if self.field_classification:
            out = [r for r in out if self._has_visible_field_class(r, admin)]
        return out

    def _has_visible_field_class(self, rec: DatasetRecord, admin: bool) -> bool:
        """A field of the wanted classification the caller may see (Admins also see DENY fields)."""
        if not self.field_classification:
            return True
        return any(f["classification"] == self.field_classification and (admin or f["policy"] != "DENY")
                   for f in rec.fields)


def search(scope: RequestScope, filters: SearchFilters, *, limit: int = DEFAULT_PAGE,
           after: str | None = None) -> dict[str, Any]:
    """Readable datasets matching every filter, ordered by name, with keyset paging.

    Text matches every whitespace-separated term (case-insensitive) against the name, description and
    the caller-visible field names. ``total_count`` counts every readable match, not just this page.
    """
    principal = scope.principal
    require(principal, "knowledge.read")
    if not 1 <= limit <= MAX_PAGE:
        raise validation_error([{"field": "limit", "message": f"must be between 1 and {MAX_PAGE}"}])
    criteria = _Criteria.of(filters)
    start = decode_cursor(after) if after else None
    snap = snapshot_of(scope)
    now = clock.now()
    bits = criteria.bitmap(snap.index, principal, now)
    if principal.datasets is not None:
        bits &= snap.index.of_ids(principal.datasets)
    page, following = snap.index.page(bits, start, limit)
    total = bits.bit_count()
    has_more = following > limit
    return {
        "items": [view(scope, r, snap, now) for r in page],
        "cursors": [encode_cursor(r) for r in page],
        "has_more": has_more,
        "has_previous": total > following,
        "next_cursor": encode_cursor(page[-1]) if page and has_more else None,
        "total_count": total,
    }


def get(scope: RequestScope, dataset_id: str) -> dict[str, Any]:
    require(scope.principal, "knowledge.read")
    return view(scope, record(scope, dataset_id))


def schema_of(scope: RequestScope, dataset_id: str) -> dict[str, Any]:
    """The normalised schema: each field with its type, classification and policy."""
    require(scope.principal, "knowledge.read")
    rec = record(scope, dataset_id)
    return {"dataset_id": rec.id, "name": rec.name, "classification": rec.classification,
            "schema_version": rec.schema_version, "fields": visible_fields(scope.principal, rec)}


def set_field_policy(scope: RequestScope, dataset_id: str, field_name: str, policy: str, *,
                     caller: Any = None) -> dict[str, Any]:
    """Set one field's policy (Admin only, audited as ``dataset.field_policy_set``); returns the field."""
    principal = scope.principal
    require(principal, "policies.manage")
    policy = str(policy).upper()
    if policy not in FIELD_POLICIES:
        raise validation_error([{"field": "policy", "message": "must be one of " + ", ".join(FIELD_POLICIES)}])
    record(scope, dataset_id)  # 404 unless visible
    region = scope.home
    cls = models.datasets(region)
    for _ in range(5):
        try:
            item = cls.get(principal.workspace_id, dataset_id, consistent_read=True)
        except cls.DoesNotExist:
            raise not_found("dataset") from None
        raw = json.loads(item.schema or "[]")
        target = next((f for f in raw if isinstance(f, dict) and f.get("name") == field_name), None)
        if target is None:
            raise not_found("field")
        before = str(target.get("policy") or "ALLOW").upper()
        target["policy"] = policy
        old_updated = item.updated_at
        now = clock.iso()
        try:
            item.update(actions=[cls.schema.set(json.dumps(raw, separators=(",", ":"))), cls.updated_at.set(now)],
                        condition=cls.updated_at == old_updated)
        except UpdateError as err:  # a concurrent writer changed the row: read again and retry
            if condition_failed(err):
                continue
            raise
        break
    else:
        raise ApiError(409, "concurrent_update", "The dataset changed while the policy was being set; retry.")
    changed(region, principal.workspace_id, datasets=[dataset_id])
    audit.append(region, principal.workspace_id, "dataset.field_policy_set",
                 actor=Actor.of(principal),
                 target={"type": "dataset", "id": dataset_id, "field": field_name},
                 details={"from": before, "to": policy}, caller=caller)
    return norm_field(target)
