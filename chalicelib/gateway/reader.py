"""The one policy-enforcing reader: every path that returns dataset content asks it what the caller may
read, and nothing else decides. It applies, in this order:

1. the dataset ACL (``catalog.can_read``): an unreadable dataset does not exist for the caller. A
   principal with a dataset scope (``Principal.datasets``: an agent limited to the datasets its builder
   ticked) reads only the datasets of its scope that the ACL lets it read: the scope narrows, never widens;
2. the row-level policy: a row whose ``document_id`` names a document with a per-document ACL that does
   not match the caller (``row_acl`` of the dataset) is absent, as if it had never been synced. Admins
   read every row. The ACL lives on the dataset's catalog item, so every container sees a change at its
   next catalog read (the catalog version check), with no per-surface cache in between;
3. every field policy, key columns included (ALLOW, MASK, HASH, REDACT, DENY: ``catalog/fieldpolicy``):
   a field under DENY does not exist for non-admins, the others change the values for everyone;
4. identifiers derived from row values (a row's key, a document id under a policy other than ALLOW,
   chunk ids) are opaque: a keyed HMAC under the workspace's field-hash key (``opaque``), in a domain of
   their own, so they neither reveal nor confirm a value and never equal a HASH-policy value.

Who uses it: the federated query engine (``gateway/query/service``: REST ``POST /v1/query``, the agent
``query`` tool) loads each dataset through ``View.load_sql``; knowledge indexing and retrieval
(``knowledge/indexer``, ``knowledge/service``: search, chat prompts and citations, the agent
``knowledge_search`` tool) take chunk identities from ``opaque_ref``/``document_ref`` and the
row mask from ``View.hidden``; lineage hides private answer nodes with ``answer_visible``. A new surface
reads through one of those services, never straight from the data bucket or an index.
"""
from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

from pynamodb.exceptions import UpdateError

from chalicelib.core import audit, clock
from chalicelib.core.audit import Actor
from chalicelib.core.authz import Principal, require
from chalicelib.core.http.errors import ApiError, not_found, validation_error
from chalicelib.core.ids import is_id
from chalicelib.core.store.conditions import condition_failed
from chalicelib.core.tenancy import RequestScope
from chalicelib.gateway import models
from chalicelib.gateway.catalog import fieldpolicy
from chalicelib.gateway.catalog import service as catalog

ROW_ACL_COLUMN = "document_id"  # the column whose value a per-document ACL is keyed by
OPAQUE_CONTEXT = b"aiplat/opaque-id/v1\x1f"
MAX_ROW_ACL_BYTES = 128 * 1024  # of JSON per dataset (the catalog item holds it; DynamoDB caps items at 400 KB)
MAX_ACL_ENTRIES = 100
# answer nodes that belong to one user (chats, agent runs and MCP tool calls are private to their user)
PRIVATE_ANSWERS = ("CHAT_ANSWER", "AGENT_RUN", "MCP_TOOL_CALL")


@dataclass(frozen=True)
class View:
    """One dataset as one caller may read it."""

    rec: catalog.DatasetRecord
    fields: tuple[dict[str, Any], ...]  # visible fields (DENY gone for non-admins) with their policies
    hidden: frozenset[str]  # values of ROW_ACL_COLUMN whose rows the caller may not read

    def policy(self, name: str) -> str | None:
        return next((f["policy"] for f in self.fields if f["name"] == name), None)

    def cache_key(self) -> tuple[Any, ...]:
        """What two callers must share to share a projection of this dataset."""
        return (self.rec.id, self.rec.name, self.rec.data_prefix,
                tuple((f["name"], f["policy"], f["type"]) for f in self.fields), tuple(sorted(self.hidden)))

    def row_filter(self) -> tuple[str, dict[str, Any]]:
        """A SQL ``WHERE`` clause (or "") over the raw Parquet dropping the hidden rows, and its parameters.
        The clause reads the raw ``document_id`` whatever its policy (it never reaches the caller)."""
        if not self.hidden:
            return "", {}
        col = fieldpolicy.quote_ident(ROW_ACL_COLUMN)
        return (f" WHERE NOT coalesce(list_contains($hidden_rows, CAST({col} AS VARCHAR)), false)",
                {"hidden_rows": sorted(self.hidden)})


# --- dataset ACL and views ----------------------------------------------------------------------------

def _admits(keys: frozenset[str], acl: list[dict[str, str]]) -> bool:
    return any(f"{a.get('type')}:{a.get('id')}" in keys for a in acl)


def row_acl_allows(principal: Principal, acl: list[dict[str, str]]) -> bool:
    """Whether a per-document ACL admits the caller (Admins: always)."""
    return catalog.is_admin(principal) or _admits(catalog.principal_keys(principal), acl)


def hidden_rows(principal: Principal, rec: catalog.DatasetRecord) -> frozenset[str]:
    """The documents of ``rec`` the caller may not read (memoised on the record per ACL key set; a
    changed ACL is a new record)."""
    if not rec.row_acl or catalog.is_admin(principal):
        return frozenset()
    keys = catalog.principal_keys(principal)
    found = rec.hidden_memo.get(keys)
    if found is None:
        found = frozenset(doc for doc, acl in rec.row_acl.items() if not _admits(keys, acl))
        if len(rec.hidden_memo) >= 256:
            rec.hidden_memo.clear()
        rec.hidden_memo[keys] = found
    return found


def view(principal: Principal, rec: catalog.DatasetRecord) -> View:
    """The caller's view of a dataset it may read (a 404 for one it may not)."""
    if not catalog.can_read(principal, rec):
        raise not_found("dataset")
    return View(rec, tuple(catalog.visible_fields(principal, rec)), hidden_rows(principal, rec))


def views(principal: Principal, records: list[catalog.DatasetRecord]) -> list[View]:
    return [view(principal, r) for r in records if catalog.can_read(principal, r)]


def readable(scope: RequestScope, snap: catalog.Snapshot | None = None) -> list[View]:
    """Every dataset the scope's caller may read, as views, in catalog order."""
    return [view(scope.principal, r) for r in catalog.readable(scope, snap)]


def by_name(scope: RequestScope, names: set[str]) -> list[View]:
    """The caller's views of the readable datasets among lower-cased ``names``, sorted by name."""
    return [view(scope.principal, r) for r in catalog.readable_by_name(scope, names)]


# --- opaque identifiers ---------------------------------------------------------------------------------

def opaque(region: str, workspace_id: str, purpose: str, *parts: str) -> str:
    """A 32-hex keyed hash of ``parts`` for ``purpose``: the same input gives the same id within a
    workspace, and nobody without the workspace's key (in ``region``, the workspace's) can compute or
    confirm it from a guessed value."""
    key = fieldpolicy.workspace_hash_key(region, workspace_id)
    msg = OPAQUE_CONTEXT + "\x1f".join((purpose, *parts)).encode()
    return hmac.new(key, msg, hashlib.sha256).hexdigest()[:32]


def opaque_ref(rec: catalog.DatasetRecord, purpose: str, *parts: str) -> str:
    return opaque(rec.region, rec.workspace_id, purpose, rec.id, *parts)


def document_ref(rec: catalog.DatasetRecord, document_id: str) -> str:
    """How a document is named outside the dataset: its id when ``document_id`` is under ALLOW (ids of
    uploaded documents are generated, ``doc_...``), else an opaque ``docref_`` of it."""
    policy = next((f["policy"] for f in rec.fields if f["name"] == ROW_ACL_COLUMN), None)
    if policy == "ALLOW":
        return document_id
    return "docref_" + opaque_ref(rec, "document", document_id)


def index_format() -> str:
    """A tag of how row identities are derived; part of every index fingerprint, so an index written
    under an older rule is rebuilt before it is used."""
    return "opaque-v1"


# --- the per-document ACL (row-level policy) -----------------------------------------------------------

def _check_acl(acl: Any) -> list[dict[str, str]]:
    if (not isinstance(acl, list) or len(acl) > MAX_ACL_ENTRIES
            or not all(isinstance(a, dict) and set(a) == {"type", "id"} and a["type"] in catalog.ACL_TYPES
                       and isinstance(a["id"], str) and 1 <= len(a["id"]) <= 64
                       and (a["type"] != "group" or is_id(a["id"], "grp")) for a in acl)):
        raise validation_error([{"field": "acl", "message": "must be a list of {type: role|user|group, id}; a "
                                                            "group's id is a grp_ id"}])
    return [{"type": a["type"], "id": a["id"]} for a in acl]


def set_document_acl(scope: RequestScope, dataset_id: str, document_id: str, acl: Any, *,
                     caller: Any = None) -> dict[str, Any]:
    """Narrow who may read one document's rows of a readable dataset (Admins: always), on every path.
    Audited as ``dataset.document_acl_set``."""
    principal = scope.principal
    require(principal, "connectors.manage")
    rec = catalog.record(scope, dataset_id)
    if not is_id(document_id, "doc"):
        raise not_found("document")
    entries = _check_acl(acl)
    region = scope.home
    cls = models.datasets(region)
    for _ in range(5):
        try:
            item = cls.get(principal.workspace_id, rec.id, consistent_read=True)
        except cls.DoesNotExist:
            raise not_found("dataset") from None
        current = json.loads(item.row_acl or "{}")
        current[document_id] = entries
        raw = json.dumps(current, separators=(",", ":"), sort_keys=True)
        if len(raw.encode()) > MAX_ROW_ACL_BYTES:
            raise ApiError(422, "row_acl_too_large", "This dataset holds the most per-document ACLs it can; "
                                                     "grant by role rather than by user, or split the dataset.")
        old_updated = item.updated_at
        try:
            item.update(actions=[cls.row_acl.set(raw), cls.updated_at.set(clock.iso())],
                        condition=cls.updated_at == old_updated)
        except UpdateError as err:
            if condition_failed(err):
                continue
            raise
        break
    else:
        raise ApiError(409, "concurrent_update", "The dataset changed while the ACL was being set; retry.")
    catalog.changed(region, principal.workspace_id, datasets=[rec.id])
    audit.append(region, principal.workspace_id, "dataset.document_acl_set",
                 actor=Actor.of(principal),
                 target={"type": "dataset", "id": rec.id, "document_id": document_id},
                 details={"entries": len(entries)}, caller=caller)
    return {"dataset_id": rec.id, "document_id": document_id, "acl": entries}


# --- lineage ---------------------------------------------------------------------------------------------

def answer_visible(principal: Principal, node_type: str, details: dict[str, Any]) -> bool:
    """Whether a lineage answer node may be shown: a private answer (a chat's, an agent run, an MCP tool
    call) only to its own user; one recorded without its user is shown to nobody."""
    if node_type.upper() not in PRIVATE_ANSWERS:
        return True
    return isinstance(details.get("user_id"), str) and details["user_id"] == principal.user_id


# --- stored answers read again ----------------------------------------------------------------------------

def sources_readable(scope: RequestScope, sources: list[dict[str, Any]]) -> list[bool]:
    """Whether the caller may read each source of a stored answer NOW (a chat answer's passages, an agent
    step's search results): ``{"dataset_id", "doc"?, "fields"?}``. False when the dataset is no longer
    readable, the document is hidden by its per-document ACL, or a field whose value the passage holds
    has left ALLOW for the caller; the same rules retrieval applies (``knowledge/service._mask``)."""
    if not sources:
        return []
    principal = scope.principal
    records = {r.id: r for r in catalog.readable(scope)}
    views: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
    out = []
    for src in sources:
        rec = records.get(str(src.get("dataset_id")))
        if rec is None:
            out.append(False)
            continue
        if rec.id not in views:
            v = view(principal, rec)
            views[rec.id] = (frozenset(f["name"] for f in v.fields if f["policy"] == "ALLOW"),
                             frozenset(document_ref(rec, d) for d in v.hidden))
        allow, hidden = views[rec.id]
        fields = src.get("fields")
        out.append(src.get("doc") not in hidden and (not isinstance(fields, list) or set(fields) <= allow))
    return out
