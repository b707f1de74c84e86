"""The catalog's version per workspace: the cheap "did the catalog change?" check of ``gateway/catalog/snapshot_cache.py``.

Every change to a workspace's datasets (schema, field policies, ACL, a sync's result, deletion) or
connectors calls ``record_change`` right after its write. It bumps the workspace's version (one item in
the ``catalog_versions`` table) and records under that version which datasets and connectors changed,
keeping the last ``KEEP`` versions. A reader holding version ``v`` reads the item (one consistent
``GetItem`` of about 1 KB) and reloads only what the versions after ``v`` name; a gap in the log (more
than ``KEEP`` versions behind, or a bump whose log write did not land) or a change too wide to name
(``EVERYTHING``) means a full reload. See docs/architecture.md, "Catalog".
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pynamodb.attributes import UnicodeAttribute

from chalicelib.core import aws, process_state
from chalicelib.core.regions import check_client_region
from chalicelib.core.store import scope_versions
from chalicelib.core.store.transact import Tx
from chalicelib.gateway import models

KEEP = 32  # versions whose changes are remembered
TAG = "catalog"  # the tag of a bump inside a transaction (``bump_in``)
MAX_NAMED = 16  # a change naming more entries is recorded as EVERYTHING (keeps the item small)
EVERYTHING = "*"
DATASET, CONNECTOR = "d:", "c:"


@dataclass(frozen=True)
class Changes:
    """The workspace's current version and the change log of its last versions."""

    version: int
    log: dict[int, str]

    def since(self, version: int) -> tuple[set[str], set[str]] | None:
        """The dataset and connector ids changed after ``version``; None when a full reload is needed."""
        datasets: set[str] = set()
        connectors: set[str] = set()
        for v in range(version + 1, self.version + 1):
            entry = self.log.get(v)
            if entry is None or entry == EVERYTHING:
                return None
            for name in entry.split(","):
                (datasets if name.startswith(DATASET) else connectors).add(name[2:])
        return datasets, connectors


def _client(region: str) -> Any:
    check_client_region(region)
    return aws.client("dynamodb", region)


def _table() -> str:
    return aws.table_name(models.CatalogVersionAttrs.TABLE)


_last_seen: dict[tuple[str, str], int] = {}  # (region, workspace) -> the version this process last saw
process_state.enrol(f"{__name__}._last_seen", _last_seen.clear)
_SEEN_MAX = 10_000  # workspaces remembered (then forgotten at once: a forgotten one costs the two-call bump)


def _saw(region: str, workspace_id: str, version: int) -> None:
    if len(_last_seen) >= _SEEN_MAX:
        _last_seen.clear()
    _last_seen[(region, workspace_id)] = version


def record_change(region: str, workspace_id: str, *, datasets: Iterable[str] = (),
                  connectors: Iterable[str] = (), everything: bool = False) -> int:
    """Bump the workspace's catalog version after a write; returns the new version. ONE conditional
    ``UpdateItem`` writes the version and its log entry together when this process knows the current
    version (it wrote or read it last); the item it returns on a refusal gives the version for one more
    try; else the version is bumped first and its entry written after (two calls)."""
    scope_versions.drop_alongside(_table(), workspace_id)  # this request's next read reads the new version
    client, key = _client(region), {"workspace_id": {"S": workspace_id}}
    entry = {"S": _entry(datasets, connectors, everything)}
    known = _last_seen.get((region, workspace_id))
    for _ in range(2):
        if known is None:
            break
        try:
            client.update_item(
                TableName=_table(), Key=key, UpdateExpression="SET #v = :new, #c = :entry REMOVE #old",
                ConditionExpression="#v = :seen" if known else "attribute_not_exists(#v)",
                ExpressionAttributeNames={"#v": "version", "#c": f"c{known + 1}", "#old": f"c{known + 1 - KEEP}"},
                ExpressionAttributeValues={":new": {"N": str(known + 1)}, ":entry": entry,
                                           **({":seen": {"N": str(known)}} if known else {})},
                ReturnValuesOnConditionCheckFailure="ALL_OLD")
        except client.exceptions.ConditionalCheckFailedException as refused:
            found = refused.response.get("Item", {}).get("version", {}).get("N")
            known = int(found) if found is not None else None
            continue
        _saw(region, workspace_id, known + 1)
        return known + 1
    answer = client.update_item(TableName=_table(), Key=key, UpdateExpression="ADD #v :one",
                                ExpressionAttributeNames={"#v": "version"},
                                ExpressionAttributeValues={":one": {"N": "1"}}, ReturnValues="UPDATED_NEW")
    version = int(answer["Attributes"]["version"]["N"])
    client.update_item(TableName=_table(), Key=key, UpdateExpression="SET #c = :entry REMOVE #old",
                       ExpressionAttributeNames={"#c": f"c{version}", "#old": f"c{version - KEEP}"},
                       ExpressionAttributeValues={":entry": entry})
    _saw(region, workspace_id, version)
    return version


def _entry(datasets: Iterable[str], connectors: Iterable[str], everything: bool = False) -> str:
    names = sorted({DATASET + d for d in datasets if d} | {CONNECTOR + c for c in connectors if c})
    return EVERYTHING if everything or not names or len(names) > MAX_NAMED else ",".join(names)


def bump_in(tx: Tx, workspace_id: str, *, datasets: Iterable[str] = (), connectors: Iterable[str] = ()) -> int | None:
    """Add the bump to ``tx`` (tagged ``TAG``, conditional on the version this process last saw): the version
    it commits, then given to ``bump_landed``. None when the process knows no version: nothing is added, and
    the writer calls ``record_change`` after its commit. A refusal tagged ``TAG`` calls ``bump_refused``."""
    known = _last_seen.get((tx.region, workspace_id))
    if known is None:
        return None
    V = models.catalog_versions(tx.region)
    new = known + 1
    tx.update(V(workspace_id), actions=[V.version.set(new), UnicodeAttribute(attr_name=f"c{new}").set(
                  _entry(datasets, connectors)), UnicodeAttribute(attr_name=f"c{new - KEEP}").remove()],
              condition=(V.version == known) if known else V.version.does_not_exist(), tag=TAG)
    return new


def bump_landed(region: str, workspace_id: str, version: int) -> None:
    """The transaction holding ``bump_in``'s bump to ``version`` committed."""
    scope_versions.drop_alongside(_table(), workspace_id)
    _saw(region, workspace_id, version)


def bump_refused(region: str, workspace_id: str) -> None:
    """The version this process knew was stale: the writer's next try bumps after its commit."""
    scope_versions.drop_alongside(_table(), workspace_id)
    _last_seen.pop((region, workspace_id), None)


def _scope_item(workspace_id: str) -> tuple[str, dict[str, Any]]:
    return _table(), {"workspace_id": {"S": workspace_id}}


scope_versions.read_alongside(_scope_item)  # a request reads the version with its scope, no call of its own


def in_hand(region: str, workspace_id: str) -> bool:
    """This request read the version with its scope (``current`` costs no call)."""
    return scope_versions.alongside(_table(), region, workspace_id)[0]


def current(region: str, workspace_id: str) -> Changes:
    """The workspace's version and change log now (one consistent read), or as a request read it with its
    scope at its start (``scope_versions.read_alongside``) when this request wrote no catalog change since."""
    found, item = scope_versions.alongside(_table(), region, workspace_id)
    if not found:
        item = _client(region).get_item(TableName=_table(), Key={"workspace_id": {"S": workspace_id}},
                                        ConsistentRead=True).get("Item")
    item = item or {}
    log = {int(name[1:]): value["S"] for name, value in item.items() if name[:1] == "c" and name[1:].isdigit()}
    version = int(item.get("version", {}).get("N", 0))
    if not found or version >= _last_seen.get((region, workspace_id), 0):  # read earlier: never a step back
        _saw(region, workspace_id, version)
    return Changes(version, log)
