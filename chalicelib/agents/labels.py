"""Labels: what a run has read, attached to everything the run writes, and checked against each reader.

A run's *taint* is the union of the labels of everything it has read so far (``ToolContext.labels``).
Whatever the run writes carries its taint as it is at that moment: a memory value, a step's input and
output on the ledger, the run's answer. A reader sees a labelled thing only while the reader's **live**
rights satisfy every label (checked at read time, so a narrowed ACL or a stricter field policy applies to
what was written before it). The label is attached to the write, never derived from its content, so an
encoded, reversed or split copy carries it exactly like the value itself.

A label names the data, not a value:

- ``("dataset", ds, classification)``: the dataset was read; satisfied while the reader may read it
  (``catalog.can_read``: the dataset ACL and, for an agent, its dataset scope). A deleted dataset is
  satisfied by nobody.
- ``("field", ds, name, policy)``: the field was readable under ``policy`` (every field the reader saw of a
  dataset it read, ALLOW included); satisfied while the reader still sees the field under that same policy
  or under ALLOW (a stricter or different policy, or a field gone, is not).
- ``("document", ds, doc)``: rows or passages of a document with its own access list may have been read;
  satisfied while the document's live list admits the reader (or it has no list any more).

``restricted`` says whether a taint holds anything narrower than the workspace (a policy other than ALLOW,
a per-document list, a dataset ACL that leaves out a role that runs agents, a CONFIDENTIAL or PII
classification): a tool
that sends data outside the workspace (``Tool.sends_out``) is refused while the run's taint is restricted.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from chalicelib.core.authz import Principal, Role
from chalicelib.core.tenancy import RequestScope
from chalicelib.gateway import reader
from chalicelib.gateway.catalog import service as catalog

Label = tuple[str, ...]
OPEN_CLASSIFICATIONS = ("PUBLIC", "INTERNAL")
AGENT_ROLES = frozenset({f"role:{Role.ADMIN.value}", f"role:{Role.MEMBER.value}"})  # the roles that run agents


def of_dataset(principal: Principal, rec: catalog.DatasetRecord) -> set[Label]:
    """The labels of reading ``rec`` as ``principal``: the dataset, each field it sees with its policy, and
    each document with an access list that admits it (its rows may be in what it read)."""
    out: set[Label] = {("dataset", rec.id, rec.classification)}
    out.update(("field", rec.id, f["name"], str(f.get("policy") or "ALLOW").upper())
               for f in catalog.visible_fields(principal, rec))
    out.update(("document", rec.id, doc) for doc, acl in (rec.row_acl or {}).items()
               if acl and reader.row_acl_allows(principal, acl))
    return out


def of_datasets(scope: RequestScope, dataset_ids: Iterable[str], *, fields: bool = True) -> set[Label]:
    """The labels of reading each of ``dataset_ids`` as the scope's caller (``fields=False``: metadata only,
    the dataset label)."""
    ids = set(dataset_ids)
    if not ids:
        return set()
    principal = scope.principal
    snap = catalog.snapshot_of(scope)
    out: set[Label] = set()
    for ds in ids:
        rec = snap.datasets.get(ds)
        if rec is None:
            continue
        out |= of_dataset(principal, rec) if fields else {("dataset", rec.id, rec.classification)}
    return out


def _satisfied(principal: Principal, label: Label, snap: catalog.Snapshot) -> bool:
    rec = snap.datasets.get(label[1]) if len(label) > 1 else None
    if rec is None or not catalog.can_read(principal, rec):
        return False
    if label[0] == "dataset":
        return True
    if label[0] == "field" and len(label) == 4:
        live = next((str(f.get("policy") or "ALLOW").upper() for f in catalog.visible_fields(principal, rec)
                     if f["name"] == label[2]), None)
        return live is not None and live in ("ALLOW", label[3])
    if label[0] == "document" and len(label) == 3:
        acl = (rec.row_acl or {}).get(label[2])
        return not acl or reader.row_acl_allows(principal, acl)
    return False  # a label this code does not know: nobody satisfies it


def satisfied(scope: RequestScope, labels: Iterable[Label]) -> bool:
    """Whether the live rights of the scope's caller satisfy every label (an empty set: yes)."""
    wanted = set(labels)
    if not wanted:
        return True
    snap = catalog.snapshot_of(scope)
    return all(_satisfied(scope.principal, label, snap) for label in wanted)


def restricted(scope: RequestScope, labels: Iterable[Label]) -> bool:
    """Whether the labels hold anything narrower than the workspace (see the module docstring)."""
    wanted = set(labels)
    if any(label[0] == "document" or (label[0] == "field" and label[3] != "ALLOW")
           or (label[0] == "dataset" and label[2] not in OPEN_CLASSIFICATIONS) for label in wanted):
        return True
    snap = catalog.snapshot_of(scope) if wanted else None
    for label in wanted:
        rec = snap.datasets.get(label[1]) if snap is not None and label[0] == "dataset" else None
        if rec is not None and not AGENT_ROLES <= rec.acl_keys:  # a dataset ACL that leaves a role out
            return True
    return False


def dumps(labels: Iterable[Label]) -> str:
    return json.dumps(sorted(list(label) for label in set(labels)))


def loads(text: str | None) -> set[Label]:
    """Labels stored by ``dumps`` (an absent attribute: none)."""
    try:
        raw: Any = json.loads(text) if text else []
    except ValueError:
        return {("unreadable",)}  # never satisfied: a corrupt label hides rather than shows
    return {tuple(str(p) for p in label) for label in raw if isinstance(label, list) and label}
