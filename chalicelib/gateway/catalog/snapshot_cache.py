"""The per-process snapshot of a workspace's catalog, kept current by the catalog version.

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
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from chalicelib.core import aws, clock, process_state
from chalicelib.core.config import settings
from chalicelib.gateway import models
from chalicelib.gateway.catalog import snapshots as stored_snapshots
from chalicelib.gateway.catalog import versions as catalog_versions
from chalicelib.gateway.catalog.records import DatasetRecord, order_key, record_of_stored, to_record, with_haystack
from chalicelib.gateway.ingest.connector_view import to_dict

if TYPE_CHECKING:
    from chalicelib.core.store.transact import Tx
    from chalicelib.gateway.catalog.index import CatalogIndex

T = TypeVar("T")
FULL_RELOAD_SECONDS = 900  # safety net for a write whose version bump was lost (a crash in between)


def _index_class() -> type[CatalogIndex]:
    """The search index, imported at the first snapshot: it needs NumPy, which a cold start should not load."""
    from chalicelib.gateway.catalog.index import CatalogIndex  # noqa: PLC0415 - the index loads NumPy: at first search, not at cold start

    return CatalogIndex


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


def checked_alongside(region: str, workspace_id: str, work: Callable[[], T]) -> T:
    """``work()`` on this container's snapshot of the workspace's catalog while the version check that
    snapshot is due runs on another thread (``aws.alongside``), instead of before it. ``work``'s answer, or
    its error, stands only when the check finds the snapshot current; else it is thrown away and ``work``
    runs again on the reloaded snapshot, as any read does after a change. So the answer reflects a
    version read after the call began, as with the check first, and the check's round trip overlaps
    ``work``. Without a snapshot, with no check due, with the version already read with the request's
    scope, or with one this container knows is stale (it wrote a change), ``work`` just runs, checking
    first as usual. ``work`` must not write."""
    now = clock.now()
    with _lock:
        snap = _cache.get(workspace_id)
    if (snap is None or now - snap.checked_at < _ttl() or snap.checked_at == float("-inf")  # known stale (``_stale``)
            or now - snap.loaded_at >= FULL_RELOAD_SECONDS or _unchecked.get() is not None
            or catalog_versions.in_hand(region, workspace_id)):  # read with the request's scope: no round trip
        return work()
    stats.version_checks += 1
    check = aws.alongside(catalog_versions.current, region, workspace_id)
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


def changed(region: str, workspace_id: str, *, datasets: tuple[str, ...] | list[str] = (),
            connectors: tuple[str, ...] | list[str] = (), everything: bool = False) -> None:
    """Record, after a write, that these datasets or connectors changed: every container (this one from
    its next read) reloads them. ``region``: the workspace's."""
    catalog_versions.record_change(region, workspace_id, datasets=datasets,
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

    region: str
    workspace_id: str
    datasets: list[str]
    connectors: list[str]
    version: int | None = None  # the bump the transaction holds; None: bumped after the commit

    def landed(self) -> None:
        """The write committed: as ``changed``, without a call when the transaction held the bump."""
        if self.version is None:
            changed(self.region, self.workspace_id, datasets=self.datasets, connectors=self.connectors)
            return
        catalog_versions.bump_landed(self.region, self.workspace_id, self.version)
        _stale(self.workspace_id)

    def refused(self, tags: set[str]) -> bool:
        """The transaction was refused for ``tags``: True when only for the bump (the version this process
        knew was stale; the next try bumps after its commit)."""
        if catalog_versions.TAG in tags:
            catalog_versions.bump_refused(self.region, self.workspace_id)
        return tags == {catalog_versions.TAG}


def change_in(tx: Tx, region: str, workspace_id: str, *, datasets: list[str] | tuple[str, ...] = (),
              connectors: list[str] | tuple[str, ...] = ()) -> Change:
    """The catalog version's bump in the write's own transaction ``tx`` (when this process knows the
    version): no call of its own, and no change that commits without its bump. ``landed`` after the
    commit."""
    version = catalog_versions.bump_in(tx, workspace_id, datasets=datasets, connectors=connectors)
    return Change(region, workspace_id, list(datasets), list(connectors), version)


def _full_load(region: str, workspace_id: str, version: int, now: float) -> Snapshot:
    stats.full_loads += 1
    records = [with_haystack(to_record(i, region)) for i in models.datasets(region).query(workspace_id)]
    connectors = {c.id: to_dict(c, region) for c in models.connectors(region).query(workspace_id)}
    records.sort(key=order_key)
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
    records = [with_haystack(record_of_stored(raw, region)) for raw in found.records]
    snap = _assemble(records, found.connectors, found.version, found.loaded_at, now)
    if stored.version == found.version:
        return snap
    return _partial_load(snap, region, workspace_id, delta[0], delta[1], stored.version, now)


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
            at = bisect.bisect_left(ordered, order_key(old), key=order_key)
            if at < len(ordered) and ordered[at] is old:
                del ordered[at]
            if by_name.get(old.name.lower()) is old:
                del by_name[old.name.lower()]
        stats.records_read += 1
        try:
            rec = with_haystack(to_record(cls.get(workspace_id, dataset_id, consistent_read=True), region))
        except cls.DoesNotExist:
            continue
        datasets[rec.id] = rec
        added.append(rec)
        bisect.insort(ordered, rec, key=order_key)
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


def snapshot(region: str, workspace_id: str, trust_seconds: float | None = None) -> Snapshot:
    """The workspace's catalog (``region``: the workspace's) as of its current version (see the module
    docstring). ``trust_seconds``
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
