"""Scheduled and queue-triggered work, declared once here: ``SCHEDULED`` (name, interval, handler) and
``QUEUE_HANDLERS`` (queue, handler). ``app.py`` derives one Lambda handler per entry, and the local runner
(``infra/local_run.py``) calls these same functions with Lambda-shaped events.

It is also the composition root for reactions across contexts: a sync that changed a dataset's data
rebuilds its knowledge index (``index_changed_dataset``, passed to the sync worker), so the gateway never
imports the knowledge context; a search that finds an index stale queues its rebuild on ``knowledge-index``.

Workers must not import graphql or duckdb at module level.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from chalicelib.core.logs import get_logger
from chalicelib.core.store.work_timing import REAP_EVERY_S, SYNC_REAP_EVERY_S
from chalicelib.core.telemetry import tracing

log = get_logger("workers")


@dataclass(frozen=True)
class Scheduled:
    name: str
    every_seconds: int
    handler: Callable[[dict[str, Any]], Any]
    scope: str = "regional"  # "global": run by the global region's workers only; "regional": by each region's


def runs_here(job: Scheduled) -> bool:
    """Whether this deployment runs ``job``: global jobs in the global region, regional ones everywhere
    (each iterating only the regions it serves, ``core.regions.served_regions``)."""
    from chalicelib.core.regions import serves_global

    return job.scope == "regional" or serves_global()


def rotate_signing_keys(event: dict[str, Any]) -> dict[str, Any]:
    """Monthly: a new signing key; the old one stays published until its tokens expire."""
    from chalicelib.identity.oauth.signing import rotate

    kid = rotate()
    log.info("signing key rotated", extra={"kid": kid})
    return {"active_kid": kid}


def retire_signing_keys(event: dict[str, Any]) -> dict[str, Any]:
    """Hourly: unpublish keys whose last possible token has expired."""
    from chalicelib.identity.oauth.signing import retire_expired

    retired = retire_expired()
    if retired:
        log.info("signing keys retired", extra={"kids": retired})
    return {"retired": retired}


def expire_support_grants(event: dict[str, Any]) -> dict[str, Any]:
    """Every 5 minutes: write the audit event of each support access grant that has expired."""
    from chalicelib.platform.support.service import expire_grants

    return expire_grants(event)


def audit_digest(event: dict[str, Any]) -> dict[str, Any]:
    """Every 15 minutes: a signed digest of each changed workspace chain head, in the regions this
    deployment serves. Runs as its own function with its own role: the only one that may sign with the
    digest key or write the digest bucket (``.chalice/policy-audit-digest-<region>.json``)."""
    from chalicelib.core.regions import served_regions
    from chalicelib.platform.audit import digests as audit_digests

    results = {region: audit_digests.run(region).as_dict() for region in served_regions()}
    tampered = {r: res["tampered"] for r, res in results.items() if res["tampered"]}
    if tampered:
        log.error("audit digest refused tampered chains", extra={"tampered": tampered})
    return results


def expire_chats(event: dict[str, Any]) -> dict[str, Any]:
    """Every 15 minutes: delete chats past their workspace's auto-expiry."""
    from chalicelib.chat.expiry import sweep

    return sweep(event)


def reap_agent_runs(event: dict[str, Any]) -> dict[str, Any]:
    """Every minute: runs past their deadline become expired; runs whose worker is gone become failed."""
    from chalicelib.agents.runtime import reaper
    from chalicelib.core.regions import served_regions

    return reaper.reap(served_regions())


def reap_sync_runs(event: dict[str, Any]) -> dict[str, Any]:
    """Every 5 minutes: sync runs whose message was never sent, or whose worker died, are sent again."""
    from chalicelib.core.regions import served_regions
    from chalicelib.gateway.ingest import sync_reaper

    return sync_reaper.reap(served_regions())


def sweep_agent_data(event: dict[str, Any]) -> dict[str, Any]:
    """Hourly: agent memory older than 30 days and runs past their workspace's auto-expiry are deleted."""
    from chalicelib.agents.runtime import reaper
    from chalicelib.core.regions import served_regions

    return reaper.sweep(served_regions())


def backup_workspaces(event: dict[str, Any]) -> dict[str, Any]:
    """Daily: an encrypted backup of every workspace of the regions served here."""
    from chalicelib.residency import backups

    return backups.backup_all(event)


def sweep_backups(event: dict[str, Any]) -> dict[str, Any]:
    """Daily: backups older than 35 days are deleted (the emulator applies no bucket lifecycle)."""
    from chalicelib.residency import backups

    return backups.sweep(event)


def replicate_workspaces(event: dict[str, Any]) -> dict[str, Any]:
    """Every 5 minutes (the 15-minute RPO with room for a slow pass): the incremental DR copy of each
    workspace with ``cross-region-dr``, and the deletion of the copy of each that turned it off."""
    from chalicelib.residency import replication

    return replication.run(event)


def sweep_invitations(event: dict[str, Any]) -> dict[str, Any]:
    """Hourly: expired pending invitations and their address claims are deleted."""
    from chalicelib.platform.workspaces import invitations

    return invitations.sweep_expired(event)


def sweep_email_codes(event: dict[str, Any]) -> dict[str, Any]:
    """Hourly: e-mail sign-in code records past their expiry are deleted (global directory)."""
    from chalicelib.identity.signin import email_codes

    return email_codes.sweep_expired(event)


SCHEDULED: tuple[Scheduled, ...] = (
    Scheduled("rotate_signing_keys", 30 * 24 * 3600, rotate_signing_keys, scope="global"),
    Scheduled("retire_signing_keys", 3600, retire_signing_keys, scope="global"),
    Scheduled("expire_support_grants", 300, expire_support_grants),
    Scheduled("expire_chats", 900, expire_chats),
    Scheduled("reap_agent_runs", REAP_EVERY_S, reap_agent_runs),
    Scheduled("reap_sync_runs", SYNC_REAP_EVERY_S, reap_sync_runs),
    Scheduled("sweep_agent_data", 3600, sweep_agent_data),
    Scheduled("audit_digest", 15 * 60, audit_digest),
    Scheduled("backup_workspaces", 24 * 3600, backup_workspaces),
    Scheduled("sweep_backups", 24 * 3600, sweep_backups),
    Scheduled("replicate_workspaces", 5 * 60, replicate_workspaces),
    Scheduled("sweep_invitations", 3600, sweep_invitations),
    Scheduled("sweep_email_codes", 3600, sweep_email_codes, scope="global"),
)


def index_changed_dataset(region: str, workspace_id: str, dataset_id: str) -> None:
    """A sync changed a dataset's data: its knowledge index is rebuilt (never fails the sync; bm25s loads
    only now, not at the sync worker's cold start)."""
    from chalicelib.knowledge import indexer

    indexer.on_sync(region, workspace_id, dataset_id)


def knowledge_index(event: dict[str, Any]) -> dict[str, Any]:
    """Knowledge index rebuilds a search found stale and asked for (``knowledge-index`` queue)."""
    from chalicelib.knowledge import indexer

    return indexer.handle(event)


def sync_jobs(event: dict[str, Any]) -> dict[str, Any]:
    """Connector sync runs (``sync-jobs`` queue); the worker module loads duckdb only when it runs."""
    from chalicelib.gateway.ingest import sync_worker

    return sync_worker.handle(event, on_changed=index_changed_dataset)


def agent_runs(event: dict[str, Any]) -> dict[str, Any]:
    """Agent runs (``agent-runs`` queue)."""
    from chalicelib.agents.runtime import worker

    return worker.handle(event)


def audit_exports(event: dict[str, Any]) -> dict[str, Any]:
    """Audit exports (``audit-exports`` queue). Runs as its own function with its own role: the only one
    that may sign with the export key or write the archive (``.chalice/policy-audit-exports-<region>.json``)."""
    from chalicelib.platform.audit import export as audit_export

    return audit_export.handle(event)


def chat_answers(event: dict[str, Any]) -> dict[str, Any]:
    """Chat answers generated outside the request that asked (``chat-answers`` queue)."""
    from chalicelib.chat import answers

    return answers.handle(event)


def private_views() -> dict[str, Any]:
    """How each table private to its author reads to that author now (``access_requests.PrivateViews``)."""
    from chalicelib.agents import memory, runs
    from chalicelib.chat import redaction
    from chalicelib.core import tenancy
    from chalicelib.core.tenancy import RequestScope

    scopes: dict[tuple[str, str], RequestScope] = {}

    def scope(reader: Any) -> RequestScope:  # the reader's scope, resolved once per reader
        key = (reader.workspace_id, reader.user_id)
        if key not in scopes:
            scopes[key] = tenancy.scope_of(reader)
        return replace(scopes[key], principal=reader)

    def view(export: Callable[[RequestScope, dict[str, Any]], Any]) -> Callable[[Any, dict[str, Any]], Any]:
        return lambda reader, item: export(scope(reader), item)

    return {"chats": view(redaction.exported), "agent_runs": view(runs.exported), "agent_memory": view(memory.exported),
            "presets": lambda reader, item: item}  # instructions the person wrote: theirs to read as written


def residency_jobs(event: dict[str, Any]) -> dict[str, Any]:
    """Approved restores and access requests (``residency-jobs`` queue)."""
    from chalicelib.residency import worker

    return worker.handle(event, private_views())


# queue name (as declared in infra/resources.py) -> handler(lambda_sqs_event) -> {"batchItemFailures": [...]}
QUEUE_HANDLERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "sync-jobs": sync_jobs,
    "agent-runs": agent_runs,
    "audit-exports": audit_exports,
    "residency-jobs": residency_jobs,
    "chat-answers": chat_answers,
    "knowledge-index": knowledge_index,
}


def handler_name(queue: str) -> str:
    """The Lambda handler name of a queue's consumer (``sync-jobs`` -> ``sync_jobs``)."""
    return queue.replace("-", "_")


class RecordFailed(Exception):
    """Raised to Lambda so it returns the record to its queue (the redrive policy then applies)."""


def as_lambda(handler: Callable[[dict[str, Any]], dict[str, Any]], event: dict[str, Any]) -> dict[str, Any]:
    """Run a queue handler under Lambda. Chalice cannot turn on ``ReportBatchItemFailures`` for its SQS
    event sources, so a returned ``batchItemFailures`` would be ignored and the message deleted; with
    ``batch_size=1`` a failed record is reported by raising instead."""
    result = handler(event)
    tracing.flush_if_lambda()  # spans and lineage events: the function is frozen after it returns
    failed = result.get("batchItemFailures") or []
    if failed:
        raise RecordFailed(f"{len(failed)} record(s) failed: " + ", ".join(f["itemIdentifier"] for f in failed))
    return result
