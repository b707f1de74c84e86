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

Datasets and connectors of a workspace are kept as a per-process snapshot tagged with the workspace's
catalog version (``gateway/catalog/versions.py``). Every read first checks the version (one consistent
``GetItem``; ``CATALOG_CACHE_SECONDS``, default 0, lets a container trust a check for that long) and
reloads only the datasets and connectors changed since; a full reload happens on the first read, after a
gap in the change log, and at most every ``FULL_RELOAD_SECONDS`` as a safety net. Every writer calls
``changed`` after its write. Each snapshot carries the inverted index search answers from
(``gateway/catalog/index.py``), built with a full load and updated with the changed datasets.
"""
from __future__ import annotations

import bisect
import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pynamodb.exceptions import UpdateError

from chalicelib.core import audit, aws, clock, process_state
from chalicelib.core.audit import Actor
from chalicelib.core.authz import Principal, Role, require
from chalicelib.core.config import settings
from chalicelib.core.durations import format_duration, parse_duration
from chalicelib.core.http import paging
from chalicelib.core.http.errors import ApiError, not_found, validation_error
from chalicelib.core.store.conditions import condition_failed
from chalicelib.core.tenancy import region_of
from chalicelib.gateway import models
from chalicelib.gateway.catalog import snapshots as stored_snapshots
from chalicelib.gateway.catalog import versions as catalog_versions
from chalicelib.gateway.ingest.connector_view import to_dict

if TYPE_CHECKING:
    from chalicelib.core.store.transact import Tx
    from chalicelib.gateway.catalog.index import CatalogIndex

def _index_class() -> type[CatalogIndex]:
    """The search index, imported at the first snapshot: it needs NumPy, which a cold start should not load."""
    from chalicelib.gateway.catalog.index import CatalogIndex  # noqa: PLC0415 - the index loads NumPy: at first search, not at cold start

    return CatalogIndex


T = TypeVar("T")
CLASSIFICATIONS = ("PUBLIC", "INTERNAL", "CONFIDENTIAL", "PII")
FIELD_POLICIES = ("ALLOW", "MASK", "HASH", "REDACT", "DENY")
FIELD_TYPES = ("STRING", "INTEGER", "FLOAT", "BOOLEAN", "TIMESTAMP", "DATE", "JSON")
ACL_TYPES = ("role", "user", "group")  # group: a workspace group (grp_...), matched by its members
DEFAULT_PAGE = 25
MAX_PAGE = 100
FULL_RELOAD_SECONDS = 900  # safety net for a write whose version bump was lost (a crash in between)


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


@dataclass
class Snapshot:
    loaded_at: float
    datasets: dict[str, DatasetRecord]
    ordered: list[DatasetRecord]  # by (name, id): the paging order
    connectors: dict[str, dict[str, Any]]
    by_name: dict[str, DatasetRecord] = field(default_factory=dict)  # lower-cased name -> record
    _readable: dict[frozenset[str], list[DatasetRecord]] = field(default_factory=dict, repr=False)
    version: int = 0  # the workspace's catalog version this snapshot reflects (at least)
    checked_at: float = 0.0  # when the version was last compared with the stored one
    index: CatalogIndex = field(default_factory=lambda: _index_class()(), repr=False)  # what search uses


@dataclass
class LoadStats:
    """What snapshots cost this process (tests count reloads with it; benchmarks print it)."""

    version_checks: int = 0
    full_loads: int = 0
    partial_loads: int = 0
    records_read: int = 0  # dataset and connector items read by partial loads
    snapshot_reads: int = 0  # first snapshots of this container taken from the stored object


stats = LoadStats()


_cache: dict[str, Snapshot] = {}
_lock = threading.Lock()
# Whose next read must load in full from DynamoDB, not from the stored snapshot (``invalidate``): these
# workspaces, and every workspace not loaded in full since the last ``invalidate()`` of all.
_reload_due: set[str] = set()
_reload_all = [0]  # bumped by ``invalidate()``
_loaded_in_full: dict[str, int] = {}  # workspace -> ``_reload_all`` at its last full load


_trusted_within: ContextVar[float] = ContextVar("catalog_trusted_within", default=0.0)
# inside ``checked_alongside``: the workspace whose snapshot is read unchecked, and that snapshot
_unchecked: ContextVar[tuple[str, Snapshot] | None] = ContextVar("catalog_unchecked", default=None)


def _ttl(trust_seconds: float | None = None) -> float:
    """How long a version check is trusted: the caller's bound (else ``CATALOG_CACHE_SECONDS``), at least
    that of the unit of work it runs in (``one_version_within``)."""
    return max(settings().catalog_cache_seconds if trust_seconds is None else trust_seconds, _trusted_within.get())


@contextlib.contextmanager
def one_version_within(seconds: float) -> Iterator[None]:
    """Inside (this thread or task): a version check is trusted for ``seconds`` at least, so one unit of work
    that reads the catalog many times (an agent run's delivery: each tool reads it) checks the version once
    per ``seconds``, not at every read."""
    token = _trusted_within.set(seconds)
    try:
        yield
    finally:
        _trusted_within.reset(token)


def checked_alongside(workspace_id: str, work: Callable[[], T]) -> T:
    """``work()`` on this container's snapshot of the workspace's catalog while the version check that
    snapshot is due runs on another thread (``aws.alongside``), instead of before it. ``work``'s answer, or
    its error, stands only when the check finds the snapshot current; else it is thrown away and ``work``
    runs again on the reloaded snapshot, as any read does after a change. So the answer reflects a
    version read after the call began, as with the check first, and the check's round trip overlaps
    ``work``. Without a snapshot, with no check due, or with one this container knows is stale (it wrote
    a change), ``work`` just runs, checking first as usual. ``work`` must not write."""
    now = clock.now()
    with _lock:
        snap = _cache.get(workspace_id)
    if (snap is None or now - snap.checked_at < _ttl() or snap.checked_at == float("-inf")  # known stale (``_stale``)
            or now - snap.loaded_at >= FULL_RELOAD_SECONDS or _unchecked.get() is not None):
        return work()
    stats.version_checks += 1
    check = aws.alongside(catalog_versions.current, region_of(workspace_id), workspace_id)
    token = _unchecked.set((workspace_id, snap))
    failure: Exception | None = None
    try:
        answer = work()
    except Exception as err:  # noqa: BLE001 - the caller's, once the check says the snapshot was current
        failure = err
    finally:
        _unchecked.reset(token)
    if check.result().version != snap.version:
        _stale(workspace_id)
        return work()
    snap.checked_at = max(snap.checked_at, now)
    if failure is not None:
        raise failure
    return answer


def invalidate(workspace_id: str | None = None, *, keep_stored: bool = False) -> None:
    """Forget this process's snapshot of one workspace (or all): the next read loads it in full from
    DynamoDB. ``keep_stored``: only forget, as a new container would be, so the next read may start from
    the stored snapshot object (``catalog/snapshots.py``)."""
    with _lock:
        if workspace_id is None:
            _cache.clear()
            if not keep_stored:
                _reload_all[0] += 1
        else:
            _cache.pop(workspace_id, None)
            if not keep_stored:
                _reload_due.add(workspace_id)


process_state.enrol("gateway.catalog.snapshots", invalidate)


def changed(workspace_id: str, *, datasets: tuple[str, ...] | list[str] = (),
            connectors: tuple[str, ...] | list[str] = (), everything: bool = False) -> None:
    """Record, after a write, that these datasets or connectors changed: every container (this one from
    its next read) reloads them."""
    catalog_versions.record_change(region_of(workspace_id), workspace_id, datasets=datasets,
                                   connectors=connectors, everything=everything)
    _stale(workspace_id)


def _stale(workspace_id: str) -> None:
    """This container checks the version at its next read of the workspace."""
    with _lock:
        snap = _cache.get(workspace_id)
        if snap is not None:
            snap.checked_at = float("-inf")


@dataclass
class Change:
    """A change of datasets or connectors committed with the write that makes it (``change_in``)."""

    workspace_id: str
    datasets: list[str]
    connectors: list[str]
    version: int | None = None  # the bump the transaction holds; None: bumped after the commit

    def landed(self) -> None:
        """The write committed: as ``changed``, without a call when the transaction held the bump."""
        if self.version is None:
            changed(self.workspace_id, datasets=self.datasets, connectors=self.connectors)
            return
        catalog_versions.bump_landed(region_of(self.workspace_id), self.workspace_id, self.version)
        _stale(self.workspace_id)

    def refused(self, tags: set[str]) -> bool:
        """The transaction was refused for ``tags``: True when only for the bump (the version this process
        knew was stale; the next try bumps after its commit)."""
        if catalog_versions.TAG in tags:
            catalog_versions.bump_refused(region_of(self.workspace_id), self.workspace_id)
        return tags == {catalog_versions.TAG}


def change_in(tx: Tx, workspace_id: str, *, datasets: list[str] | tuple[str, ...] = (),
              connectors: list[str] | tuple[str, ...] = ()) -> Change:
    """The catalog version's bump in the write's own transaction ``tx`` (when this process knows the
    version): no call of its own, and no change that commits without its bump. ``landed`` after the
    commit."""
    version = catalog_versions.bump_in(tx, workspace_id, datasets=datasets, connectors=connectors)
    return Change(workspace_id, list(datasets), list(connectors), version)


def _norm_field(raw: dict[str, Any]) -> dict[str, Any]:
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


def to_record(item: models.DatasetAttrs) -> DatasetRecord:
    fields = [_norm_field(f) for f in json.loads(item.schema or "[]") if isinstance(f, dict) and f.get("name")]
    acl = [{"type": str(a.get("type", "")).lower(), "id": str(a.get("id", ""))}
           for a in json.loads(item.acl or "[]")
           if isinstance(a, dict) and str(a.get("type", "")).lower() in ACL_TYPES]
    stored = str(item.classification or "INTERNAL").upper()
    rec = DatasetRecord(
        id=item.id, workspace_id=item.workspace_id, name=item.name, connector_id=item.connector_id,
        owner=item.owner, description=item.description or "", fields=fields, acl=acl,
        data_prefix=item.data_prefix, row_count=int(item.row_count or 0),
        schema_version=int(item.schema_version or 0), last_synced_at=item.last_synced_at,
        created_at=item.created_at, updated_at=item.updated_at,
        classification=highest([f["classification"] for f in fields],
                               stored if stored in CLASSIFICATIONS else "INTERNAL"),
    )
    rec.acl_keys = frozenset(f"{a['type']}:{a['id']}" for a in acl)
    rec.row_acl = _row_acl(getattr(item, "row_acl", None))
    rec.fresh_since = clock.parse_iso(rec.last_synced_at or rec.created_at).timestamp()
    return rec


def _row_acl(raw: str | None) -> dict[str, list[dict[str, str]]]:
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


def _index(rec: DatasetRecord) -> DatasetRecord:
    rec._haystack = " ".join([rec.name, rec.description]
                             + [f["name"] for f in rec.fields if f["policy"] != "DENY"]).lower()
    return rec


def _order_key(rec: DatasetRecord) -> tuple[str, str]:
    return rec.name, rec.id


def _full_load(region: str, workspace_id: str, version: int, now: float) -> Snapshot:
    stats.full_loads += 1
    records = [_index(to_record(i)) for i in models.datasets(region).query(workspace_id)]
    connectors = {c.id: to_dict(c, region) for c in models.connectors(region).query(workspace_id)}
    records.sort(key=_order_key)
    stored_snapshots.write(region, workspace_id, version, now, records, connectors)  # for the next new container
    return _assemble(records, connectors, version, now, now)


def _assemble(records: list[DatasetRecord], connectors: dict[str, dict[str, Any]], version: int, loaded_at: float,
              now: float) -> Snapshot:
    return Snapshot(loaded_at, {r.id: r for r in records}, records, connectors, {r.name.lower(): r for r in records},
                    version=version, checked_at=now, index=_index_class().build(records))


def _from_stored(region: str, workspace_id: str, stored: catalog_versions.Changes,
                 now: float) -> Snapshot | None:
    """This container's first snapshot from the object a full load wrote (``catalog/snapshots.py``), brought
    up to ``stored`` by version; None when the object cannot be used (then the caller loads in full)."""
    found = stored_snapshots.read(region, workspace_id)
    if found is None or found.version > stored.version or now - found.loaded_at >= FULL_RELOAD_SECONDS:
        return None
    delta = stored.since(found.version) if stored.version > found.version else (set(), set())
    if delta is None:
        return None
    stats.snapshot_reads += 1
    records = [_index(_record_of(raw)) for raw in found.records]
    snap = _assemble(records, found.connectors, found.version, found.loaded_at, now)
    if stored.version == found.version:
        return snap
    return _partial_load(snap, region, workspace_id, delta[0], delta[1], stored.version, now)


def _record_of(raw: dict[str, Any]) -> DatasetRecord:
    rec = DatasetRecord(**raw)
    rec.acl_keys = frozenset(f"{a['type']}:{a['id']}" for a in rec.acl)
    rec.fresh_since = clock.parse_iso(rec.last_synced_at or rec.created_at).timestamp()
    return rec


def _partial_load(snap: Snapshot, region: str, workspace_id: str, dataset_ids: set[str], connector_ids: set[str],
                  version: int, now: float) -> Snapshot:
    """A new snapshot with only the named datasets and connectors read again (consistently)."""
    stats.partial_loads += 1
    datasets, ordered, by_name = dict(snap.datasets), list(snap.ordered), dict(snap.by_name)
    cls = models.datasets(region)
    removed: list[DatasetRecord] = []
    added: list[DatasetRecord] = []
    for dataset_id in sorted(dataset_ids):
        old = datasets.pop(dataset_id, None)
        if old is not None:
            removed.append(old)
            at = bisect.bisect_left(ordered, _order_key(old), key=_order_key)
            if at < len(ordered) and ordered[at] is old:
                del ordered[at]
            if by_name.get(old.name.lower()) is old:
                del by_name[old.name.lower()]
        stats.records_read += 1
        try:
            rec = _index(to_record(cls.get(workspace_id, dataset_id, consistent_read=True)))
        except cls.DoesNotExist:
            continue
        datasets[rec.id] = rec
        added.append(rec)
        bisect.insort(ordered, rec, key=_order_key)
        by_name[rec.name.lower()] = rec
    connectors = dict(snap.connectors)
    if connector_ids:
        conn_cls = models.connectors(region)
        for connector_id in sorted(connector_ids):
            stats.records_read += 1
            try:
                connectors[connector_id] = to_dict(conn_cls.get(workspace_id, connector_id, consistent_read=True),
                                                   region)
            except conn_cls.DoesNotExist:
                connectors.pop(connector_id, None)
    return Snapshot(snap.loaded_at, datasets, ordered, connectors, by_name, version=version, checked_at=now,
                    index=snap.index.updated(removed, added))


def snapshot(workspace_id: str, trust_seconds: float | None = None) -> Snapshot:
    """The workspace's catalog as of its current version (see the module docstring). ``trust_seconds``
    (default ``CATALOG_CACHE_SECONDS``): how long a version check is trusted before the next one; a
    caller that keeps its own data for a bound (knowledge search: its manifests) passes that bound."""
    unchecked = _unchecked.get()
    if unchecked is not None and unchecked[0] == workspace_id:
        return unchecked[1]
    now = clock.now()
    with _lock:
        snap = _cache.get(workspace_id)
    if snap is not None and now - snap.checked_at < _ttl(trust_seconds):
        return snap
    region = region_of(workspace_id)
    stats.version_checks += 1
    stored = catalog_versions.current(region, workspace_id)  # read before loading: a later change shows next time
    if snap is not None and now - snap.loaded_at < FULL_RELOAD_SECONDS:
        if stored.version == snap.version:
            snap.checked_at = now
            return snap
        delta = stored.since(snap.version) if stored.version > snap.version else None
        if delta is not None:
            fresh = _partial_load(snap, region, workspace_id, delta[0], delta[1], stored.version, now)
            return _keep(workspace_id, fresh)
    with _lock:
        due = workspace_id in _reload_due or (_reload_all[0] and _loaded_in_full.get(workspace_id, 0) < _reload_all[0])
    if snap is None and not due:
        first = _from_stored(region, workspace_id, stored, now)
        if first is not None:
            return _keep(workspace_id, first)
    loaded = _full_load(region, workspace_id, stored.version, now)
    with _lock:
        _reload_due.discard(workspace_id)
        if len(_loaded_in_full) > 10_000:
            _loaded_in_full.clear()
        _loaded_in_full[workspace_id] = _reload_all[0]
    return _keep(workspace_id, loaded)


def _keep(workspace_id: str, snap: Snapshot) -> Snapshot:
    with _lock:
        current = _cache.get(workspace_id)
        if current is None or current.version <= snap.version:
            _cache[workspace_id] = snap
    return snap


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


def readable(principal: Principal, snap: Snapshot | None = None) -> list[DatasetRecord]:
    """Every dataset the caller may read, in paging order (memoised per snapshot and ACL key set)."""
    snap = snap or snapshot(principal.workspace_id)
    keys = frozenset(["*admin*"]) if is_admin(principal) else principal_keys(principal)
    found = snap._readable.get(keys)
    if found is None:
        found = [r for r in snap.ordered if _acl_admits(principal, r)]
        if len(snap._readable) < 256:
            snap._readable[keys] = found
    if principal.datasets is not None:
        return [r for r in found if r.id in principal.datasets]
    return found


def readable_by_name(principal: Principal, names: set[str]) -> list[DatasetRecord]:
    """The readable datasets among lower-cased ``names``, sorted by name."""
    snap = snapshot(principal.workspace_id)
    hits = [snap.by_name[n] for n in names if n in snap.by_name]
    return sorted((r for r in hits if can_read(principal, r)), key=lambda r: r.name)


def record(principal: Principal, dataset_id: str) -> DatasetRecord:
    """A readable dataset by id; 404 for unknown, unreadable or another workspace's ids."""
    rec = snapshot(principal.workspace_id).datasets.get(dataset_id) if isinstance(dataset_id, str) else None
    if rec is None or not can_read(principal, rec):
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


def view(principal: Principal, rec: DatasetRecord, snap: Snapshot | None = None,
         now: float | None = None) -> dict[str, Any]:
    """The ``Dataset`` shape shared by REST and GraphQL."""
    snap = snap or snapshot(principal.workspace_id)
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


def search(principal: Principal, filters: SearchFilters, *, limit: int = DEFAULT_PAGE,
           after: str | None = None) -> dict[str, Any]:
    """Readable datasets matching every filter, ordered by name, with keyset paging.

    Text matches every whitespace-separated term (case-insensitive) against the name, description and
    the caller-visible field names. ``total_count`` counts every readable match, not just this page.
    """
    require(principal, "knowledge.read")
    if not 1 <= limit <= MAX_PAGE:
        raise validation_error([{"field": "limit", "message": f"must be between 1 and {MAX_PAGE}"}])
    criteria = _Criteria.of(filters)
    start = decode_cursor(after) if after else None
    snap = snapshot(principal.workspace_id)
    now = clock.now()
    bits = criteria.bitmap(snap.index, principal, now)
    if principal.datasets is not None:
        bits &= snap.index.of_ids(principal.datasets)
    page, following = snap.index.page(bits, start, limit)
    total = bits.bit_count()
    has_more = following > limit
    return {
        "items": [view(principal, r, snap, now) for r in page],
        "cursors": [encode_cursor(r) for r in page],
        "has_more": has_more,
        "has_previous": total > following,
        "next_cursor": encode_cursor(page[-1]) if page and has_more else None,
        "total_count": total,
    }


def get(principal: Principal, dataset_id: str) -> dict[str, Any]:
    require(principal, "knowledge.read")
    return view(principal, record(principal, dataset_id))


def schema_of(principal: Principal, dataset_id: str) -> dict[str, Any]:
    """The normalised schema: each field with its type, classification and policy."""
    require(principal, "knowledge.read")
    rec = record(principal, dataset_id)
    return {"dataset_id": rec.id, "name": rec.name, "classification": rec.classification,
            "schema_version": rec.schema_version, "fields": visible_fields(principal, rec)}


def set_field_policy(principal: Principal, dataset_id: str, field_name: str, policy: str, *,
                     caller: Any = None) -> dict[str, Any]:
    """Set one field's policy (Admin only, audited as ``dataset.field_policy_set``); returns the field."""
    require(principal, "policies.manage")
    policy = str(policy).upper()
    if policy not in FIELD_POLICIES:
        raise validation_error([{"field": "policy", "message": "must be one of " + ", ".join(FIELD_POLICIES)}])
    record(principal, dataset_id)  # 404 unless visible
    region = region_of(principal.workspace_id)
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
    changed(principal.workspace_id, datasets=[dataset_id])
    audit.append(region, principal.workspace_id, "dataset.field_policy_set",
                 actor=Actor.of(principal),
                 target={"type": "dataset", "id": dataset_id, "field": field_name},
                 details={"from": before, "to": policy}, caller=caller)
    return _norm_field(target)
