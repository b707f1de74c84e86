"""Residency storage: restore requests, access requests and the erasure ledger (regional, in the
workspace's region), the global ledger of erased identities, and the constants that say which regional
tables and bucket prefixes hold a workspace's content."""
from __future__ import annotations

from dataclasses import dataclass

from pynamodb.attributes import NumberAttribute, UnicodeAttribute, UnicodeSetAttribute

from chalicelib.core.store.tables import BaseModel, global_model, regional

BACKUP_RETENTION_DAYS = 35  # equal to infra.resources.BACKUP_RETENTION_DAYS (infra/ is not packaged; a test
# keeps them and BACKED_UP_TABLES in step with the declaration)
BACKUP_BUCKET = "backups"
BACKUP_KEY = "backups"  # KMS key alias name, separate from the "data" key
BACKUP_ROOT = "workspaces/"  # backups/<root><workspace>/<backup>/{manifest.json,items.enc,objects/...}
RESTORE_WINDOW_SECONDS = 24 * 3600
REQUIRED_ADMINS = 2  # the requester plus one other Admin

# regional tables keyed by something other than ``workspace_id``: attribute -> value starts with '<ws>#'
PREFIX_KEYED: dict[str, str] = {"agent_run_log": "run_key", "agent_memory": "scope"}
# regional tables never backed up: transient replay answers, the restore workflow itself, the DR
# replication state (a restore must not rewind the checkpoint of the copy in the secondary region), the
# erasure ledger and access requests (they must outlive any restore), and audit personal values (kept
# out of backups so that an erasure is final; the audit events themselves are never restored), and the
# catalog version counter (a cache-coherence marker derived from the catalog, not content), and the
# audit chain head (derived from the events, which are never restored either), the API request counters
# (one-minute windows), and the event logs of answers being generated (kept a day; the chat holds every
# finished answer)
NOT_BACKED_UP: frozenset[str] = frozenset({"idempotency", "chat_answers", "restore_requests", "replication_state",
                                           "audit_personal",
                                           "access_requests", "erasure_ledger", "revocation_ledger",
                                           "catalog_versions", "audit_heads", "request_counters"})
# backed up but never restored: the audit trail is append-only (the template denies deletes and updates);
# memberships are who may act now: a restore must neither bring back a removed member nor drop the
# Admins approving it, and the member count lives in the global directory; the directory (groups, SCIM
# users and SCIM tokens) likewise: a restore must not bring back a deleted group or a revoked SCIM token
NOT_RESTORED: frozenset[str] = frozenset({"audit_events", "memberships", "directory"})
# bucket -> prefix template of a workspace's objects
WORKSPACE_PREFIXES: dict[str, str] = {"data": "datasets/{ws}/", "documents": "uploads/{ws}/",
                                      "knowledge": "indexes/{ws}/"}



@dataclass(frozen=True)
class TableKeys:
    name: str
    hash_key: str
    range_key: str | None = None


# every regional table of infra/resources.py except NOT_BACKED_UP, with its key (declaration order)
BACKED_UP_TABLES: tuple[TableKeys, ...] = (
    TableKeys("memberships", "workspace_id", "user_id"), TableKeys("audit_events", "workspace_id", "seq"),
    TableKeys("connectors", "workspace_id", "id"), TableKeys("datasets", "workspace_id", "id"),
    TableKeys("sync_runs", "workspace_id", "id"), TableKeys("lineage_edges", "workspace_id", "edge"),
    TableKeys("invitations", "workspace_id", "id"), TableKeys("support_grants", "workspace_id", "id"),
    TableKeys("model_access", "workspace_id"), TableKeys("knowledge", "workspace_id", "key"),
    TableKeys("chats", "workspace_id", "id"), TableKeys("agents", "workspace_id", "id"),
    TableKeys("agent_runs", "workspace_id", "id"), TableKeys("agent_run_log", "run_key", "sk"),
    TableKeys("agent_memory", "scope", "key"), TableKeys("directory", "workspace_id", "key"),
)

PENDING, QUEUED, RESTORING, RESTORED, FAILED = "pending", "queued", "restoring", "restored", "failed"
JOBS_QUEUE = "residency-jobs"  # restores and access requests, run by ``residency/worker.py``


class RestoreRequestAttrs(BaseModel):
    """A request to restore one backup; ``approvals`` holds the distinct Admins who agreed (requester first)."""

    TABLE = "restore_requests"
    workspace_id = UnicodeAttribute(hash_key=True)
    id = UnicodeAttribute(range_key=True)  # rst_...
    backup_id = UnicodeAttribute()
    requested_by = UnicodeAttribute()
    requested_at = UnicodeAttribute()
    expires_at = NumberAttribute()  # epoch seconds: approvals after it are refused
    approvals = UnicodeSetAttribute()
    status = UnicodeAttribute()
    report = UnicodeAttribute(null=True)  # JSON counts once finished
    error = UnicodeAttribute(null=True)


def restore_requests(region: str) -> type[RestoreRequestAttrs]:
    return regional(RestoreRequestAttrs, region)


# --- access requests and erasure ---------------------------------------------------------------------
EXPORT, ERASE = "export", "erase"
ACCESS_KINDS = (EXPORT, ERASE)
DONE, RUNNING = "completed", "running"  # besides QUEUED and FAILED
ACCESS_DEADLINE_SECONDS = 7 * 24 * 3600  # the documented time, the same in every region
EXPORT_BUCKET = "access-exports"
EXPORT_LINK_SECONDS = 3600


class AccessRequestAttrs(BaseModel):
    """A data-subject request (export or erasure) about ``subject`` made in a workspace."""

    TABLE = "access_requests"
    workspace_id = UnicodeAttribute(hash_key=True)
    id = UnicodeAttribute(range_key=True)  # dsr_...
    kind = UnicodeAttribute()  # export | erase
    subject = UnicodeAttribute()  # user id
    scope = UnicodeAttribute()  # account (the subject's own request: every workspace) | workspace
    requested_by = UnicodeAttribute()
    requested_at = UnicodeAttribute()
    due_at = UnicodeAttribute()
    status = UnicodeAttribute()
    completed_at = UnicodeAttribute(null=True)
    result = UnicodeAttribute(null=True)  # JSON: export parts {region, key, files} or erasure counts
    error = UnicodeAttribute(null=True)


class ErasureLedgerAttrs(BaseModel):
    """One erased user of one workspace: ids and a keyed MAC of the address, never personal data."""

    TABLE = "erasure_ledger"
    workspace_id = UnicodeAttribute(hash_key=True)
    user_id = UnicodeAttribute(range_key=True)
    email_mac = UnicodeAttribute()
    erased_at = UnicodeAttribute()
    request_id = UnicodeAttribute()


class ErasedUserAttrs(BaseModel):
    """The global store's ledger: an erased identity (its id and a keyed MAC of its address)."""

    TABLE = "erased_users"
    user_id = UnicodeAttribute(hash_key=True)
    email_mac = UnicodeAttribute()
    erased_at = UnicodeAttribute()
    request_id = UnicodeAttribute()


def access_requests(region: str) -> type[AccessRequestAttrs]:
    return regional(AccessRequestAttrs, region)


def erasure_ledger(region: str) -> type[ErasureLedgerAttrs]:
    return regional(ErasureLedgerAttrs, region)


def erased_users() -> type[ErasedUserAttrs]:
    return global_model(ErasedUserAttrs)


# --- cross-region disaster recovery (replication.py) ----------------------------------------------
DR_BUCKET = "dr"  # declared in infra/resources.py DR_BUCKETS, exists only in the DR regions
DR_KEY = "dr"  # the secondary region's KMS key alias name (DR_KEYS)
DR_ROOT = "workspaces/"  # dr/<root><workspace>/{key.json,items/...,objects/...}
REPLICATION_INTERVAL_SECONDS = 5 * 60  # the schedule: a pass every 5 minutes keeps the lag under the RPO
