"""The sync worker: ``handle`` receives Lambda-shaped SQS events from the ``sync-jobs`` queue.

One message = one SyncRun (or the lineage of one federated query, written by ``query/lineage_queue.py``).
For a run, the worker:
1. takes the connector's lease (conditional update: free, expired, or already this sync's), so two
   syncs of one connector never run at once; a message that finds the lease taken waits (its
   visibility timeout is shortened to ``BUSY_RETRY_S`` and it is retried);
2. reads what changed since the saved cursor (INCREMENTAL) or everything (FULL_REFRESH);
3. normalises the records to the dataset's schema (widening types and recording drift);
4. writes a complete new Parquet snapshot under a prefix of its own (``<sync>-a<attempt>``);
5. commits dataset (schema, data_prefix, row_count, freshness), connector (cursor, health, lease
   released), SyncRun (SUCCEEDED), the connector -> dataset lineage edge and the audit event in ONE
   DynamoDB transaction (step 1 takes the lease and marks the run RUNNING in one too).
Nothing is visible before step 5, so a crash anywhere loses nothing and duplicates nothing: the
redelivered message starts again from the old cursor. On the last allowed receive
(``ApproximateReceiveCount`` = the queue's ``maxReceiveCount``) a failure marks the run FAILED and the
message goes on to the dead-letter queue; before that a failed attempt leaves the run RETRYING with its
``error``. A permanent error (``SourceError.permanent``: missing bucket/table/key, access denied to the
assumed role, bad configuration, an unreadable file) marks the run FAILED at once and the message is
acknowledged: no retry can fix it. While a run is RUNNING, readers report objects and rows read so far
(``Src.report``), stored on the run at most every ``PROGRESS_EVERY_S`` seconds.

A run that changed a dataset's data then calls ``on_changed(region, workspace_id, dataset_id)``: the reaction
other contexts have to a sync (rebuilding the knowledge index) is passed in by the composition root
(``workers/jobs.py``), so this module imports none of them.

DuckDB is imported lazily (inside ``storage``); importing this module loads neither duckdb nor graphql.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pynamodb.exceptions import DoesNotExist, UpdateError

from chalicelib.core import audit, clock, tenancy
from chalicelib.core.audit import SYSTEM
from chalicelib.core.ids import is_id
from chalicelib.core.logs import get_logger
from chalicelib.core.regions import served_regions
from chalicelib.core.store import queues, tables
from chalicelib.core.store.transact import Refused, Tx
from chalicelib.core.telemetry import tracing
from chalicelib.gateway import models, storage
from chalicelib.gateway.catalog import lineage_edges, lineage_events
from chalicelib.gateway.catalog import service as catalog
from chalicelib.gateway.ingest import connectors, normalize
from chalicelib.gateway.ingest import typed_rows as ingest
from chalicelib.gateway.ingest.sources import Batch, SourceError, Src, module
from chalicelib.gateway.query import lineage_queue
from chalicelib.gateway.vocabulary import LINEAGE_CONNECTOR, LINEAGE_DATASET, highest_classification

log = get_logger("gateway.sync")
QUEUE = "sync-jobs"
LEASE_S = 900  # a lease outlives the queue's visibility timeout (300 s)
BUSY_RETRY_S = 15  # how soon a message that found the connector busy is retried
BUSY_MAX_WAITS = 48  # re-sends of a waiting message (each after ~5 receives x 15 s) before it gives up (~1 h)
COMMIT_ATTEMPTS = 5
PROGRESS_EVERY_S = 2.0  # how often a running sync's progress counts are written to its run
ACTIVE = ("QUEUED", "RUNNING", "RETRYING")  # a run that may still be worked on
DEFAULT_ACL = [{"type": "role", "id": "admin"}, {"type": "role", "id": "member"}]
OnChanged = Callable[[str, str, str], None]  # (region, workspace_id, dataset_id) of data a sync changed


class Busy(Exception):
    """Another sync holds the connector's lease."""


@dataclass(frozen=True)
class Outcome:
    status: str  # done | failed | busy
    detail: str = ""


def handle(event: dict[str, Any], on_changed: OnChanged | None = None) -> dict[str, Any]:
    """Lambda SQS handler with partial batch failures."""
    return queues.handle_batch(event, lambda record: _handle_record(record, on_changed), what="sync")


def _handle_record(record: dict[str, Any], on_changed: OnChanged | None = None) -> bool:
    lineage_body = queues.parse_body(record, workspace_id="ws")
    if lineage_body is not None and lineage_queue.is_lineage(lineage_body):  # a query's lineage, not a sync
        region = tenancy.region_of(lineage_body["workspace_id"])
        if region not in served_regions():
            log.error("query lineage message for another region", extra={"message_id": record.get("messageId")})
            return False
        return lineage_queue.handle(region, lineage_body)
    body = queues.parse_body(record, workspace_id="ws", sync_id="sync", connector_id="conn")
    if body is None:
        log.error("poison sync message (unparseable)", extra={"message_id": record.get("messageId")})
        return False  # redelivered until maxReceiveCount, then the dead-letter queue
    region = tenancy.region_of(body["workspace_id"])
    if region not in served_regions():  # another region's work is never processed here
        log.error("sync message for another region", extra={"message_id": record.get("messageId"), "region": region})
        return False
    receives = queues.receive_count(record)
    last = receives >= queues.max_receives(QUEUE, region)
    dataset_id = body.get("dataset_id")
    outcome = run_sync(body["workspace_id"], body["sync_id"], attempt=receives, last_attempt=last,
                       on_changed=on_changed, connector_id=body["connector_id"],
                       dataset_id=dataset_id if is_id(dataset_id, "ds") else None)
    if outcome.status == "busy":
        waits = int(body.get("waits", 0)) + 1
        if not last and record.get("receiptHandle"):
            queues.retry_later(QUEUE, region, record, BUSY_RETRY_S)
            return False
        if waits > BUSY_MAX_WAITS:
            _fail(region, body["workspace_id"], body["sync_id"], "the connector stayed busy too long", final=True)
            return True
        # waiting must not push the message to the dead-letter queue: send a fresh copy, ack this one
        queues.enqueue(QUEUE, region, {**body, "waits": waits}, group_key=body["connector_id"])
        return True
    return outcome.status == "done"


def _run(region: str, workspace_id: str, sync_id: str) -> models.SyncRunAttrs | None:
    try:
        return models.sync_runs(region).get(workspace_id, sync_id, consistent_read=True)
    except DoesNotExist:
        return None


def _start_reads(region: str, workspace_id: str, sync_id: str, connector_id: str | None, dataset_id: str | None
                 ) -> tuple[models.SyncRunAttrs | None, models.ConnectorAttrs | None, models.DatasetAttrs | None]:
    """The run, its connector and the dataset it was requested for, read consistently: in one ``BatchGetItem``
    when the message named the ones the run names, else the run first (the commit is conditional on the
    dataset's snapshot as read here, so a sync that committed since is never overwritten)."""
    if connector_id and dataset_id:
        run, conn, dataset = tables.get_together(region, [(models.sync_runs(region), workspace_id, sync_id),
                                                          (models.connectors(region), workspace_id, connector_id),
                                                          (models.datasets(region), workspace_id, dataset_id)])
        if run is None or (run.connector_id, run.dataset_id) == (connector_id, dataset_id):
            return run, conn, dataset
    else:
        run = _run(region, workspace_id, sync_id)
        if run is None:
            return None, None, None
    wanted = [(models.connectors(region), workspace_id, run.connector_id)]
    if run.dataset_id:
        wanted.append((models.datasets(region), workspace_id, run.dataset_id))
    conn, *dataset = tables.get_together(region, wanted)
    return run, conn, dataset[0] if dataset else None


def _acquire(conn: models.ConnectorAttrs, run: models.SyncRunAttrs, attempt: int) -> None:
    """The connector's lease and the run's RUNNING state in one transaction."""
    C, R = models.ConnectorAttrs, models.SyncRunAttrs
    now = int(clock.now())
    tx = Tx(tenancy.region_of(conn.workspace_id))
    tx.update(conn, actions=[C.lock_owner.set(run.id), C.lock_expires_at.set(now + LEASE_S), C.status.set("SYNCING")],
              condition=C.id.exists() & (C.lock_owner.does_not_exist() | (C.lock_owner == run.id)
                                         | (C.lock_expires_at < now)), tag="lease")
    tx.update(run, actions=[R.status.set("RUNNING"), R.attempts.set(attempt),
                            R.started_at.set(run.started_at or clock.iso())], tag="run")
    try:
        tx.commit()
    except Refused:
        raise Busy() from None
    run.status, run.attempts, run.started_at = "RUNNING", attempt, run.started_at or clock.iso()


def _release(region: str, workspace_id: str, connector_id: str, sync_id: str, status: str, error: str | None) -> None:
    C = models.ConnectorAttrs
    conn = models.connectors(region)(workspace_id, connector_id)
    actions = [C.lock_owner.remove(), C.lock_expires_at.remove(), C.status.set(status),
               C.last_checked_at.set(clock.iso())]
    actions.append(C.last_error.set(error[:500]) if error else C.last_error.remove())
    try:
        conn.update(actions=actions, condition=C.lock_owner == sync_id)
    except UpdateError:
        pass  # lease already gone (connector deleted or taken over after expiry)


def _fail(region: str, workspace_id: str, sync_id: str, error: str, *, final: bool) -> None:
    run = _run(region, workspace_id, sync_id)
    if run is None or run.status in ("SUCCEEDED", "FAILED"):
        return
    R = models.SyncRunAttrs
    actions = [R.status.set("FAILED" if final else "RETRYING"), R.error.set(error[:1000])]
    if final:
        actions.append(R.finished_at.set(clock.iso()))
    try:
        run.update(actions=actions, condition=R.status.is_in(*ACTIVE))
    except UpdateError:
        return
    _release(region, workspace_id, run.connector_id, sync_id, "FAILING" if final else "DEGRADED", error)
    if final:
        audit.append(region, workspace_id, "connector.sync_failed", actor=SYSTEM,
                     target={"type": "connector", "id": run.connector_id},
                     details={"sync_id": sync_id, "error": error[:500], "attempts": int(run.attempts or 0)})


def _mark_lost(region: str, workspace_id: str, sync_id: str) -> None:
    run = _run(region, workspace_id, sync_id)
    if run is None or run.status not in ACTIVE:
        return
    R = models.SyncRunAttrs
    try:
        run.update(actions=[R.status.set("FAILED"), R.finished_at.set(clock.iso()),
                            R.error.set("the worker holding the connector's lease was lost (lease expired)")],
                   condition=R.status.is_in(*ACTIVE))
    except UpdateError:
        pass


@lineage_events.sync_run(tenancy.region_of)
@tracing.traced("sync", lambda ws, sync_id, **_: tracing.sync_attrs(ws, sync_id))
def run_sync(workspace_id: str, sync_id: str, *, attempt: int = 1, last_attempt: bool = False,
             on_changed: OnChanged | None = None, connector_id: str | None = None,
             dataset_id: str | None = None) -> Outcome:
    """Run one SyncRun (see the module docstring); safe to call again for the same run. ``connector_id`` and
    ``dataset_id`` (from its message) let the run be read together with them; they are only used when the
    run names the same ones."""
    region = tenancy.region_of(workspace_id)
    run, conn, dataset = _start_reads(region, workspace_id, sync_id, connector_id, dataset_id)
    if run is None:
        return Outcome("failed", "no such sync run")
    if run.status in ("SUCCEEDED", "FAILED"):
        if run.status == "SUCCEEDED" and run.dataset_id:  # a crash between commit and ack: lineage again
            lineage_edges.record_edge(region, workspace_id, run.connector_id, LINEAGE_CONNECTOR, run.dataset_id,
                                      LINEAGE_DATASET)
        return Outcome("done", "already finished")
    if conn is None:
        _fail(region, workspace_id, sync_id, "the connector was deleted", final=True)
        return Outcome("done", "connector deleted")
    if conn.status == "PAUSED":  # paused after the request was queued: the run does not happen
        _fail(region, workspace_id, sync_id, "the connector was paused before the sync started", final=True)
        return Outcome("done", "connector paused")
    previous_owner = conn.lock_owner
    read = _Read(dataset) if run.dataset_id and run.dataset_id == conn.dataset_id else None
    try:
        looked = _look_first(region, conn, run, read)
        if looked is not None and _unchanged(looked[0]):  # nothing new at the source: no lease, no data work
            try:
                result = _commit_unchanged(region, conn, run, attempt, read, *looked)
            finally:
                looked[0].cleanup()
            if previous_owner and previous_owner != sync_id:  # its lease had lapsed: that worker was lost
                _mark_lost(region, workspace_id, previous_owner)
        else:
            try:
                _acquire(conn, run, attempt)
            except Busy:
                if looked is not None:
                    looked[0].cleanup()
                return Outcome("busy")
            if previous_owner and previous_owner != sync_id:  # took over an expired lease: that worker was lost
                _mark_lost(region, workspace_id, previous_owner)
            result = _sync(region, conn, run, attempt, on_changed, read, looked)
    except Busy:  # another sync took the lease while this one found nothing new
        return Outcome("busy")
    except Exception as err:  # noqa: BLE001 - every failure is recorded on the run
        error = str(err) if isinstance(err, SourceError) else f"sync failed ({type(err).__name__})"
        if not isinstance(err, SourceError):
            log.exception("sync attempt failed", extra={"sync_id": sync_id, "attempt": attempt})
        permanent = isinstance(err, SourceError) and err.permanent
        _fail(region, workspace_id, sync_id, f"attempt {attempt}: {error}", final=last_attempt or permanent)
        if permanent:  # acknowledged: redelivering cannot help
            return Outcome("done", f"failed permanently: {error}")
        return Outcome("failed", error)
    return Outcome("done", json.dumps(result))


def _lease_free(conn: models.ConnectorAttrs, run: models.SyncRunAttrs) -> bool:
    """Whether no other sync held the connector's lease when it was read (free, lapsed or this run's)."""
    return conn.lock_owner is None or conn.lock_owner == run.id or int(conn.lock_expires_at or 0) < int(clock.now())


def _look_first(region: str, conn: models.ConnectorAttrs, run: models.SyncRunAttrs, read: _Read | None
                ) -> tuple[Batch, _Progress, Src] | None:
    """An incremental sync of a dataset that has data, with the lease free, reads (lists) its source before
    leasing: an unchanged source then needs no lease (``_commit_unchanged``). None: lease first, as usual."""
    if (run.mode != "INCREMENTAL" or read is None or read.dataset is None or not read.dataset.data_prefix
            or not conn.cursor or not _lease_free(conn, run)):
        return None
    progress = _Progress(region, run)
    src = replace(connectors.source_of(conn, region), progress=progress)
    return module(conn.kind).read(src, json.loads(conn.cursor), run.mode), progress, src


def _unchanged(batch: Batch) -> bool:
    """Nothing to merge: no record, file, replaced or deleted source, nor skipped object."""
    return (not batch.complete and not batch.replaced_sources and not batch.files and not len(batch.records)
            and not batch.rows_read and not batch.skipped)


def _commit_unchanged(region: str, conn: models.ConnectorAttrs, run: models.SyncRunAttrs, attempt: int,
                      read: _Read | None, batch: Batch, progress: _Progress, src: Src) -> dict[str, Any]:
    """Commit an incremental sync that found nothing new (cursor, freshness, the run SUCCEEDED) without having
    taken the lease: the commit is conditional on no other sync holding it (else ``Busy``) and on the
    dataset's snapshot as read, as every commit is."""
    assert read is not None and read.dataset is not None
    dataset = read.dataset
    snap = storage.SnapshotResult(prefix=dataset.data_prefix, row_count=int(dataset.row_count), rows_written=0,
                                  rows_deleted=0, parts=0)
    details: dict[str, Any] = {"rows_deleted": 0, "rows_unchanged": 0, "parts": 0, "drift": None, "skipped": []}
    _commit(region, conn, run, conn.dataset_id or "", json.loads(dataset.schema or "[]"), None, snap, batch.cursor,
            details, 0, progress.objects, read, leased_by=None, run_attempt=attempt)
    return {"rows_read": 0, "rows_written": 0, "row_count": snap.row_count}


def _sync(region: str, conn: models.ConnectorAttrs, run: models.SyncRunAttrs, attempt: int,
          on_changed: OnChanged | None, read: _Read | None = None,
          looked: tuple[Batch, _Progress, Src] | None = None) -> dict[str, Any]:
    ws = conn.workspace_id
    dataset_id = conn.dataset_id or ""
    if read is not None:
        dataset = read.dataset
    else:
        try:
            dataset = models.datasets(region).get(ws, dataset_id, consistent_read=True)
        except DoesNotExist:
            dataset = None
    mode = run.mode
    if looked is not None:  # read before the lease was taken (``_look_first``)
        batch, progress, src = looked
    else:
        # a first sync (or a dataset without data) always reads everything
        cursor = json.loads(conn.cursor) if (conn.cursor and dataset is not None and dataset.data_prefix) else None
        progress = _Progress(region, run)
        src = replace(connectors.source_of(conn, region), progress=progress)
        batch = module(conn.kind).read(src, cursor, mode)

    try:
        # a whole source's CSV objects may be typed from their samples, checked as they are written
        written = _write(region, run, attempt, batch, dataset, dataset_id, src.report, sampled=batch.complete)
        if written is None:  # a value past a sample refuted its typing: typed again, exactly
            written = _write(region, run, attempt, batch, dataset, dataset_id, src.report, sampled=False)
    finally:
        batch.cleanup()
    schema, drift, snap, rows_read, unchanged = written
    details = {"rows_deleted": snap.rows_deleted, "rows_unchanged": snap.incoming_rows - snap.rows_written,
               "parts": snap.parts, "drift": drift, "skipped": batch.skipped[:50]}
    _commit(region, conn, run, dataset_id, schema, drift, snap, batch.cursor, details, rows_read, progress.objects,
            _Read(dataset))
    if not unchanged:
        storage.remember_committed(region, snap)
    if not unchanged:  # the previous snapshot stays for in-flight readers; older ones go
        old_prefix = dataset.data_prefix if dataset else ""
        # a layer retires just the snapshot before the previous one (its lone manifest waits for a listing
        # when the sync stacked a layer); a new base, or a retried attempt (whose earlier try may have left
        # files), lists the dataset's objects to find any other leftover
        listing = snap.compacted or attempt > 1 or snap.older_files is None
        storage.prune(region, ws, dataset_id, {snap.prefix, old_prefix},
                      known={snap.prefix: snap.keys, old_prefix: snap.old_keys},
                      candidates=None if listing else snap.older_files, manifest_waits=snap.layer_added)
    if not unchanged and on_changed is not None:
        on_changed(region, ws, dataset_id)
    return {"rows_read": rows_read, "rows_written": snap.rows_written, "row_count": snap.row_count}


def _write(region: str, run: models.SyncRunAttrs, attempt: int, batch: Batch, dataset: models.DatasetAttrs | None,
           dataset_id: str, report: Callable[[int, int], None] | None, *, sampled: bool
           ) -> tuple[list[dict[str, Any]], dict[str, Any] | None, storage.SnapshotResult, int, bool] | None:
    """Parse, type, hash and key the batch natively where the source allows it (``ingest``; the last row wins
    per key) and write the new snapshot: (schema, drift, snapshot, rows read, unchanged). None when
    ``sampled`` typing was refuted by a value the writer met (nothing was uploaded)."""
    import duckdb  # noqa: PLC0415

    old_schema = json.loads(dataset.schema) if dataset else []
    version = int(dataset.schema_version) if dataset else 0
    stage = ingest.open_stage()
    try:
        incoming = ingest.Incoming(stage, batch, report)
        observer = normalize.Observer(old_schema)
        incoming.observe(observer, sampled)
        schema, drift, names = observer.finish(clock.iso(), version)
        unchanged = bool(dataset is not None and dataset.data_prefix and not batch.complete and not stage.rows_read
                         and not batch.replaced_sources and drift is None and schema == old_schema)
        if unchanged:  # nothing to merge: keep the current snapshot, commit cursor and freshness only
            snap = storage.SnapshotResult(prefix=dataset.data_prefix, row_count=int(dataset.row_count), rows_written=0,
                                          rows_deleted=0, parts=0)
            return schema, drift, snap, stage.rows_read, unchanged
        incoming.build(schema, names)
        try:
            snap = storage.write_snapshot(region, run.workspace_id, dataset_id, run.id, attempt, schema, stage,
                                          old_prefix=dataset.data_prefix if dataset else None,
                                          complete=batch.complete, replaced_sources=batch.replaced_sources,
                                          compact=bool(drift and drift["changed"]))
        except duckdb.Error:
            if not incoming.sampled:
                raise
            log.info("sampled typing refuted", extra={"sync_id": run.id, "sources": len(incoming.sampled)})
            return None
        if incoming.sampled:
            schema = incoming.settle(schema, snap.rows_by_source, snap.null_columns)
        return schema, drift, snap, stage.rows_read, unchanged
    finally:
        stage.close()


class _Progress:
    """The ``Src.progress`` callback of a run: writes objects and rows read so far to the RUNNING run, at most
    every ``PROGRESS_EVERY_S`` seconds from the sync's start (a sync that reads faster writes none: its
    counts come with the commit; best effort)."""

    def __init__(self, region: str, run: models.SyncRunAttrs) -> None:
        self.region, self.run, self.objects, self._written_at = region, run, 0, clock.now()

    def __call__(self, objects: int, rows: int) -> None:
        self.objects = objects
        now = clock.now()
        if now - self._written_at < PROGRESS_EVERY_S:
            return
        self._written_at = now
        R = models.SyncRunAttrs
        try:
            models.sync_runs(self.region)(self.run.workspace_id, self.run.id).update(
                actions=[R.objects_read.set(objects), R.rows_read.set(rows)], condition=R.status == "RUNNING")
        except UpdateError:
            pass  # finished or taken over meanwhile: the final counts come with the commit


def _merge_schema(current: list[dict[str, Any]], planned: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Planned types and new columns on top of the stored schema (whose policies may have been changed
    by an admin meanwhile)."""
    stored = {f["name"]: f for f in current}
    out = []
    for f in planned:
        base = dict(stored.get(f["name"], f))
        base["type"], base["nullable"] = f["type"], f["nullable"] or base.get("nullable", True)
        base.setdefault("source_name", f.get("source_name", f["name"]))
        out.append(base)
    return out


@dataclass(frozen=True)
class _Read:
    """The dataset item as a sync read it at its start (None: not created yet)."""

    dataset: models.DatasetAttrs | None


def _commit(region: str, conn: models.ConnectorAttrs, run: models.SyncRunAttrs, dataset_id: str,
            schema: list[dict[str, Any]], drift: dict[str, Any] | None, snap: storage.SnapshotResult,
            cursor: dict[str, Any], details: dict[str, Any], rows_read: int, objects_read: int = 0,
            read: _Read | None = None, *, leased_by: str | None = "", run_attempt: int = 0) -> None:
    """Dataset + connector cursor + SyncRun + (with the dataset's first data) the connector -> dataset lineage
    edge + the ``connector.sync_succeeded`` audit event + the catalog version's bump (other containers
    reload just this dataset and connector) in ONE transaction, conditional on the lease, the dataset's
    previous data_prefix and schema (a concurrent field-policy change is merged in, then retried).
    ``leased_by=None``: the sync holds no lease (``_commit_unchanged``); the commit is then conditional on no
    other sync holding it (refused: ``Busy``), takes the run from any active state and records ``run_attempt``."""
    leased = leased_by is not None
    D, C, R, E = models.DatasetAttrs, models.ConnectorAttrs, models.SyncRunAttrs, models.LineageEdgeAttrs
    ws = conn.workspace_id
    change: list[catalog.Change] = []  # the bump of the transaction last built
    for attempt in range(COMMIT_ATTEMPTS):
        if attempt or read is None:  # the dataset as the sync read it first; read again after a refusal
            try:
                current = models.datasets(region).get(ws, dataset_id, consistent_read=True)
            except DoesNotExist:
                current = None
        else:
            current = read.dataset
        final_schema = _merge_schema(json.loads(current.schema) if current else [], schema)
        classification = highest_classification([f["classification"] for f in final_schema])

        def effects(tx: Tx, current: models.DatasetAttrs | None = current, final_schema: list = final_schema,
                    classification: str = classification) -> None:
            now = clock.iso()
            change[:] = [catalog.change_in(tx, region, ws, datasets=[dataset_id], connectors=[conn.id])]
            if current is None:
                item = models.datasets(region)(
                    ws, dataset_id, name=conn.dataset_name or dataset_id, connector_id=conn.id,
                    owner=conn.owner or "", description=conn.description or "", classification=classification,
                    schema=json.dumps(final_schema), acl=json.dumps(DEFAULT_ACL), schema_version=1,
                    schema_drift="[]", data_prefix=snap.prefix, row_count=snap.row_count,
                    last_synced_at=now, created_at=now, updated_at=now)
                tx.save(item, condition=D.id.does_not_exist(), tag="dataset")
            else:
                drift_log = json.loads(current.schema_drift or "[]")
                actions = [D.schema.set(json.dumps(final_schema)), D.classification.set(classification),
                           D.data_prefix.set(snap.prefix), D.row_count.set(snap.row_count),
                           D.last_synced_at.set(now), D.updated_at.set(now)]
                if drift:
                    drift_log.append(drift)
                    actions += [D.schema_version.set(int(current.schema_version) + 1),
                                D.schema_drift.set(json.dumps(drift_log[-100:]))]
                elif not json.loads(current.schema or "[]") and final_schema:
                    actions.append(D.schema_version.set(max(1, int(current.schema_version))))
                prev = current.data_prefix
                cond = (D.schema == current.schema) & (
                    (D.data_prefix == prev) if prev else D.data_prefix.does_not_exist())
                tx.update(current, actions=actions, condition=cond, tag="dataset")
            tx.update(models.connectors(region)(ws, conn.id),
                      actions=[C.cursor.set(json.dumps(cursor)), C.status.set("HEALTHY"), C.last_error.remove(),
                               C.last_checked_at.set(now), C.lock_owner.remove(), C.lock_expires_at.remove(),
                               C.updated_at.set(now)],
                      condition=(C.lock_owner == run.id) if leased else C.id.exists() & (
                          C.lock_owner.does_not_exist() | (C.lock_owner == run.id)
                          | (C.lock_expires_at < int(clock.now()))), tag="lease")
            run_actions = [R.status.set("SUCCEEDED"), R.finished_at.set(now), R.rows_read.set(rows_read),
                           R.objects_read.set(objects_read),
                           R.rows_written.set(snap.rows_written), R.error.remove(),
                           R.details.set(json.dumps(details)), R.dataset_id.set(dataset_id)]
            if not leased:
                run_actions += [R.attempts.set(run_attempt), R.started_at.set(run.started_at or now)]
            tx.update(models.sync_runs(region)(ws, run.id), actions=run_actions,
                      condition=(R.status == "RUNNING") if leased else R.status.is_in(*ACTIVE), tag="run")
            if current is not None and current.data_prefix:
                return  # the dataset's first data wrote its connector -> dataset edge; it goes with the connector
            # the connector -> dataset edge, written once (a later sync leaves its creation time)
            tx.update(models.lineage_edges(region)(ws, lineage_edges.edge_key(conn.id, dataset_id)),
                      actions=[E.source_id.set(conn.id), E.source_type.set(LINEAGE_CONNECTOR),
                               E.target_id.set(dataset_id), E.target_type.set(LINEAGE_DATASET),
                               E.created_at.set(E.created_at | now),
                               E.details.set(json.dumps({"connector_kind": conn.kind}))], tag="lineage")

        try:
            audit.append(region, ws, "connector.sync_succeeded", actor=SYSTEM,
                         target={"type": "connector", "id": conn.id},
                         details={"sync_id": run.id, "dataset_id": dataset_id, "rows_read": rows_read,
                                  "rows_written": snap.rows_written, "rows_deleted": snap.rows_deleted,
                                  "schema_drift": bool(drift)}, effects=effects)
            change[0].landed()
            return
        except Refused as refused:
            log.warning("sync commit conflict", extra={"sync_id": run.id, "refused": sorted(refused.tags)})
            if change[0].refused(refused.tags):
                continue  # only the catalog version was stale: again, bumped after the commit
            fresh = _run(region, ws, run.id)
            if fresh is not None and fresh.status not in (("RUNNING",) if leased else ACTIVE):
                raise RuntimeError("the run was finished by another attempt") from None
            if "lease" in refused.tags:
                if not leased:
                    raise Busy() from None
                raise RuntimeError("the connector lease was lost") from None
            if current is not None and "dataset" in refused.tags:
                latest = models.datasets(region).get(ws, dataset_id, consistent_read=True)
                if latest.data_prefix != current.data_prefix:
                    raise RuntimeError("the dataset changed under this sync") from None
                continue  # only the schema's policies changed: merge again
            raise
    raise RuntimeError("could not commit the sync")


