"""The one declaration of every AWS resource, per scope.

``global`` resources live only in the global region (us-east-1): the workspace and identity directories.
``regional`` resources exist once in every open region and hold workspace content; code picks the
region from the workspace's residency. The local bootstrap (``infra/bootstrap.py``) and the deployment
template (``infra/template.py``) are both generated from these lists.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from chalicelib.core.store.work_timing import RESIDENCY_VISIBILITY_TIMEOUT_S, VISIBILITY_TIMEOUT_S

GLOBAL = "global"
REGIONAL = "regional"


@dataclass(frozen=True)
class Index:
    name: str
    hash_key: str
    range_key: str | None = None
    local: bool = False


@dataclass(frozen=True)
class Table:
    name: str
    scope: str
    hash_key: str
    range_key: str | None = None
    attributes: dict[str, str] = field(default_factory=dict)  # key attribute name -> S | N | B
    indexes: tuple[Index, ...] = ()
    ttl: str | None = None
    stream: str | None = None  # DynamoDB Streams view type, when the table has a change stream
    purpose: str = ""


@dataclass(frozen=True)
class Queue:
    name: str
    visibility_timeout: int = 120
    max_receive_count: int = 5
    purpose: str = ""


@dataclass(frozen=True)
class Bucket:
    name: str
    object_lock_days: int | None = None  # default retention, compliance mode
    expire_days: int | None = None
    writer: str | None = None  # the one scheduled/queue job whose role may write objects (None: every role)
    purpose: str = ""


@dataclass(frozen=True)
class Key:
    name: str
    scope: str
    spec: str = "SYMMETRIC_DEFAULT"
    usage: str = "ENCRYPT_DECRYPT"
    signer: str | None = None  # SIGN_VERIFY keys: the one job whose role may kms:Sign (no other role may)
    purpose: str = ""


AUDIT_RETENTION_DAYS = 7 * 365 + 2  # seven years, leap days included
BACKUP_RETENTION_DAYS = 35

TABLES: tuple[Table, ...] = (
    # --- global by design: directories only, no workspace content -----------------------------
    Table("users", GLOBAL, "id", attributes={"id": "S"},
          purpose="identity directory: e-mail (claim items email#...), IdP subject, credentials"),
    Table("workspaces", GLOBAL, "id", attributes={"id": "S", "slug": "S"},
          indexes=(Index("by_slug", "slug"),), purpose="workspace directory: name, slug, residency, billing, usage"),
    Table("signing_keys", GLOBAL, "kid", attributes={"kid": "S"}, purpose="token signing keys (private part KMS-encrypted)"),
    Table("revoked_tokens", GLOBAL, "jti", attributes={"jti": "S"}, ttl="expires_at", purpose="revoked token ids until they expire"),
    Table("oauth_clients", GLOBAL, "client_id", attributes={"client_id": "S"}, purpose="registered OAuth clients"),
    Table("oauth_consents", GLOBAL, "user_id", "key", attributes={"user_id": "S", "key": "S"},
          purpose="what each user allowed each third-party OAuth client, per workspace (scopes, resources, "
                  "grants issued, last use)"),
    Table("sessions", GLOBAL, "sid_hash", attributes={"sid_hash": "S", "user_id": "S", "session_id": "S"},
          indexes=(Index("by_user", "user_id", "session_id"),), ttl="expires_at",
          purpose="browser sessions at {auth_url} (cookie aiplat_sid; only its SHA-256 is stored)"),
    Table("rate_limits", GLOBAL, "key", attributes={"key": "S"}, ttl="expires_at",
          purpose="per-address and per-IP counters of the sign-in and mail-sending endpoints (one item per window)"),
    Table("auth_state", GLOBAL, "pk", attributes={"pk": "S"}, ttl="expires_at",
          purpose="sign-in state: lockout counters, TOTP steps, recovery codes, hashed one-time codes, "
                  "reset links, pending MFA, authorization codes, refresh-token families"),
    Table("api_tokens", GLOBAL, "id", attributes={"id": "S", "user_id": "S"},
          indexes=(Index("by_user", "user_id", "id"),), ttl="purge_at",
          purpose="records of user-created API tokens (the JWT itself is never stored)"),
    Table("webauthn_credentials", GLOBAL, "user_id", "credential_id",
          attributes={"user_id": "S", "credential_id": "S"},
          indexes=(Index("by_credential", "credential_id"),),
          purpose="passkeys and security keys: public key, sign counter (identity directory)"),
    Table("sso_connections", GLOBAL, "domain", attributes={"domain": "S"},
          purpose="SSO connections by e-mail domain: issuer, client id, encrypted secret, verification"),
    Table("usage_counters", GLOBAL, "workspace_id", "key", attributes={"workspace_id": "S", "key": "S"},
          purpose="aggregate model usage per workspace, day and model (tokens in/out, requests; no content)"),
    Table("erased_users", GLOBAL, "user_id", attributes={"user_id": "S"},
          purpose="erasure ledger of the global store: erased user ids and a keyed e-mail MAC (no personal data)"),
    Table("support_staff", GLOBAL, "user_id", attributes={"user_id": "S"},
          purpose="identity directory flag: which users are provider support staff (no workspace content)"),
    # --- regional: workspace content, stored in the workspace's region only ---------------------
    Table("memberships", REGIONAL, "workspace_id", "user_id",
          attributes={"workspace_id": "S", "user_id": "S"},
          indexes=(Index("by_user", "user_id", "workspace_id"),), purpose="members and their roles"),
    Table("audit_events", REGIONAL, "workspace_id", "seq",
          attributes={"workspace_id": "S", "seq": "N", "occurred_at": "S"},
          indexes=(Index("by_time", "workspace_id", "occurred_at", local=True),), stream="KEYS_ONLY",
          purpose="append-only, hash-chained audit trail; its change stream shows any overwrite or delete "
                  "to the digest job"),
    Table("audit_heads", REGIONAL, "workspace_id", attributes={"workspace_id": "S"},
          purpose="head (seq, hash) of each workspace's audit chain, the item an append's transaction "
                  "conditions on; the events stay the truth"),
    Table("connectors", REGIONAL, "workspace_id", "id", attributes={"workspace_id": "S", "id": "S"},
          purpose="gateway connectors, their health and sync cursor"),
    Table("datasets", REGIONAL, "workspace_id", "id", attributes={"workspace_id": "S", "id": "S"},
          purpose="catalog: datasets, normalised schemas, field policies, ACLs"),
    Table("catalog_versions", REGIONAL, "workspace_id", attributes={"workspace_id": "S"},
          purpose="catalog version per workspace and its last changes (readers reload only what changed)"),
    Table("sync_runs", REGIONAL, "workspace_id", "id", attributes={"workspace_id": "S", "id": "S"},
          purpose="connector sync runs"),
    Table("lineage_edges", REGIONAL, "workspace_id", "edge",
          attributes={"workspace_id": "S", "edge": "S", "target_id": "S"},
          indexes=(Index("by_target", "workspace_id", "target_id", local=True),), ttl="expires_at",
          purpose="lineage graph edges (range key '<source>><target>' walks downstream; by_target walks upstream); "
                  "query edges are one per dataset and day, kept 90 days; chat and run edges live as their subject"),
    Table("invitations", REGIONAL, "workspace_id", "id", attributes={"workspace_id": "S", "id": "S"},
          purpose="invitations (inv_...) and one pending-address claim per e-mail (email#...)"),
    Table("support_grants", REGIONAL, "workspace_id", "id", attributes={"workspace_id": "S", "id": "S"},
          purpose="time-boxed support access grants"),
    Table("idempotency", REGIONAL, "user_id", "key", attributes={"user_id": "S", "key": "S"}, ttl="expires_at",
          purpose="Idempotency-Key claims per caller: state, request fingerprint and a reference to what the "
                  "first call made (ids only; a replay re-reads the resource)"),
    Table("model_access", REGIONAL, "workspace_id", attributes={"workspace_id": "S"},
          purpose="per-role model allow-lists set by Admins"),
    Table("knowledge", REGIONAL, "workspace_id", "key", attributes={"workspace_id": "S", "key": "S"},
          purpose="knowledge index manifests (index#<dataset>) and per-document ACLs (docacl#<document>)"),
    Table("chats", REGIONAL, "workspace_id", "id", attributes={"workspace_id": "S", "id": "S"},
          ttl="expires_at", purpose="chats and their messages (swept on auto-expiry; the emulator's TTL never deletes)"),
    Table("chat_answers", REGIONAL, "workspace_id", "key", attributes={"workspace_id": "S", "key": "S"},
          ttl="expires_at", purpose="answers being generated: per answer its state ('<msg>': request, status, "
                                    "stop flag) and its events ('<msg>#<seq>'), kept a day (the chat keeps the answer)"),
    Table("agents", REGIONAL, "workspace_id", "id", attributes={"workspace_id": "S", "id": "S"},
          purpose="agent definitions: instructions, model, allowed tools, declared plan, limits"),
    Table("agent_runs", REGIONAL, "workspace_id", "id",
          attributes={"workspace_id": "S", "id": "S", "agent_key": "S", "active": "S"},
          indexes=(Index("by_agent", "workspace_id", "agent_key", local=True), Index("by_active", "active", "id")),
          ttl="expires_at",
          purpose="agent runs: status, output, usage; by_agent lists an agent's runs, the sparse by_active "
                  "index holds only queued/in_progress runs (the reaper's work list)"),
    Table("agent_run_log", REGIONAL, "run_key", "sk", attributes={"run_key": "S", "sk": "S"}, ttl="expires_at",
          purpose="per run ('<workspace>#<run>'): the step ledger (step#NNNN) and the event stream (event#NNNNNNNN)"),
    Table("agent_memory", REGIONAL, "scope", "key", attributes={"scope": "S", "key": "S"}, ttl="expires_at",
          purpose="agent memory per agent and user ('<workspace>#<agent>#<user>'), 30 days (TTL plus a sweep)"),
    Table("audit_personal", REGIONAL, "workspace_id", "ref", attributes={"workspace_id": "S", "ref": "S"},
          purpose="personal values of audit events (actor e-mail, IP, user agent, target e-mail) outside the "
                  "hashed chain, one record per event and role; erasure deletes them"),
    Table("access_requests", REGIONAL, "workspace_id", "id", attributes={"workspace_id": "S", "id": "S"},
          purpose="data-subject access requests (export, erasure): subject, requester, status, archive parts"),
    Table("erasure_ledger", REGIONAL, "workspace_id", "user_id", attributes={"workspace_id": "S", "user_id": "S"},
          purpose="erased users per workspace (pseudonymous ids and a keyed e-mail MAC only), replayed after "
                  "every restore"),
    Table("revocation_ledger", REGIONAL, "workspace_id", "ref", attributes={"workspace_id": "S", "ref": "S"},
          purpose="revoked invitations, support grants and API tokens per workspace (ids and times only), "
                  "replayed after every restore"),
    Table("restore_requests", REGIONAL, "workspace_id", "id", attributes={"workspace_id": "S", "id": "S"},
          purpose="two-person restore requests of backups: requester, approvals, time box, outcome counts"),
    Table("replication_state", REGIONAL, "workspace_id", attributes={"workspace_id": "S"},
          purpose="cross-region DR per workspace: secondary region, checkpoint time, last run's counts (no content)"),
    Table("request_counters", REGIONAL, "key", attributes={"key": "S"}, ttl="expires_at",
          purpose="API request counts per workspace and token (digests) in one-minute windows"),
    Table("directory", REGIONAL, "workspace_id", "key", attributes={"workspace_id": "S", "key": "S"},
          purpose="a workspace's groups, its SCIM-provisioned users, their name claims and its SCIM tokens "
                  "(hashed); group membership itself is on the memberships"),
)

QUEUES: tuple[Queue, ...] = (
    # visibility timeouts derive from the workers function's timeout (chalicelib/core/store/work_timing.py)
    Queue("sync-jobs", visibility_timeout=VISIBILITY_TIMEOUT_S, purpose="connector sync runs"),
    Queue("agent-runs", visibility_timeout=VISIBILITY_TIMEOUT_S, purpose="agent runs"),
    Queue("audit-exports", visibility_timeout=VISIBILITY_TIMEOUT_S,
          purpose="audit exports, built and signed by the export job"),
    Queue("chat-answers", visibility_timeout=VISIBILITY_TIMEOUT_S,
          purpose="chat answers generated outside the request that asked (chalicelib/chat/answers.py)"),
    Queue("residency-jobs", visibility_timeout=RESIDENCY_VISIBILITY_TIMEOUT_S,
          purpose="approved restores and access requests (export, erasure)"),
    Queue("knowledge-index", visibility_timeout=VISIBILITY_TIMEOUT_S,
          purpose="knowledge index rebuilds a search found stale (at most one queued per dataset and target)"),
)

BUCKETS: tuple[Bucket, ...] = (
    Bucket("data", purpose="synced datasets as Parquet"),
    Bucket("documents", purpose="uploaded documents and passages"),
    Bucket("knowledge", purpose="knowledge indexes: chunks and BM25 files per dataset build"),
    Bucket("access-exports", expire_days=7, purpose="access-request export archives (zip of JSON-lines), "
           "per region, 7 days, downloaded through presigned links"),
    Bucket("backups", expire_days=BACKUP_RETENTION_DAYS, purpose="backups, 35-day rotation, separate key"),
    Bucket("audit-archive", object_lock_days=AUDIT_RETENTION_DAYS, writer="audit_exports",
           purpose="audit exports, Object Lock compliance 7 years; written only by the export job"),
    Bucket("audit-digests", object_lock_days=AUDIT_RETENTION_DAYS, writer="audit_digest",
           purpose="signed digests of every workspace's audit chain head, Object Lock compliance 7 years; "
                   "written only by the digest job"),
)

KEYS: tuple[Key, ...] = (
    Key("token-keys", GLOBAL, purpose="encrypts the identity service's private signing keys"),
    Key("directory-secrets", GLOBAL, purpose="encrypts SSO client secrets of the identity directory"),
    Key("data", REGIONAL, purpose="encrypts workspace content and connector secrets"),
    Key("backups", REGIONAL, purpose="separate key for backups"),
    Key("field-hash", REGIONAL, spec="HMAC_256", usage="GENERATE_VERIFY_MAC",
        purpose="derives each workspace's key for the 'hash' field policy (GenerateMac; never leaves KMS)"),
    Key("audit-signing", REGIONAL, spec="RSA_2048", usage="SIGN_VERIFY", signer="audit_exports",
        purpose="signs audit export manifests; only the export job may sign"),
    Key("audit-digest-signing", REGIONAL, spec="RSA_2048", usage="SIGN_VERIFY", signer="audit_digest",
        purpose="signs the periodic audit chain-head digests; only the digest job may sign"),
)


# --- disaster-recovery-only regions (core/regions.DR_ONLY_REGIONS): they serve no API and hold only the
# encrypted DR copies of the workspaces of the residency that declares them ---------------------------
DR = "dr"
DR_BUCKETS: tuple[Bucket, ...] = (
    Bucket("dr", purpose="cross-region DR copies: one sealed object per item and object of each workspace, "
                         "under workspaces/<ws>/; deleted when the workspace turns DR off"),
)
DR_KEYS: tuple[Key, ...] = (
    Key("dr", DR, purpose="the secondary region's key: wraps each workspace's DR data key"),
)


# the jobs that alone may sign with a key or write to a bucket (each runs with its own IAM role)
AUDIT_JOBS: tuple[str, ...] = tuple(sorted({k.signer for k in KEYS if k.signer} | {b.writer for b in BUCKETS if b.writer}))


def tables(scope: str) -> list[Table]:
    return [t for t in TABLES if t.scope == scope]


def keys(scope: str) -> list[Key]:
    return [k for k in KEYS if k.scope == scope]
