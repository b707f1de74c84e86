"""The workspace's scope version item: one small item per workspace holding a counter per piece of the
request scope a container caches (docs/decisions.md, "Request scope").

Pieces of a workspace: ``directory`` (the directory entry, its settings included), ``models`` (the model
access item: allow-list, connections, budget), ``knowledge`` (the knowledge index manifests); of a user:
``memberships`` (the list of workspaces the user belongs to, ``GET /v1/me``). The items live in the global
``revoked_tokens`` table beside the revocation watermark (key ``scope:<workspace id or user id>``; the ids'
prefixes keep them apart), so a request reads them and the watermark with one consistent ``BatchGetItem``
(``core.tenancy.begin_request``); they hold ids and counters only, no workspace content.

A cached piece is valid, however old, while its counter is the one read for the current unit of work (a
request, or a queue delivery: ``unit``); every write of a piece bumps its counter (``bump``, an atomic
``ADD``) after the write, so the next unit of work in any container reads the piece again. Outside a unit
of work (a background job that opened none) the item itself is trusted for ``OUTSIDE_UNIT_SECONDS``.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Generic, TypeVar

from chalicelib.core import aws, clock, process_state
from chalicelib.core.config import settings

DIRECTORY = "directory"
MODELS = "models"
KNOWLEDGE = "knowledge"
MEMBERSHIPS = "memberships"  # a user's
PIECES = (DIRECTORY, MODELS, KNOWLEDGE, MEMBERSHIPS)
TABLE = "revoked_tokens"  # beside the revocation watermark: one BatchGetItem reads both
OUTSIDE_UNIT_SECONDS = 5.0  # the bound outside a unit of work (the former per-piece bound)

Versions = dict[str, int]
V = TypeVar("V")

# the unit of work's reads: ("v", workspace) -> Versions, and whatever else a unit reads once (memberships)
_unit: ContextVar[dict[Hashable, Any] | None] = ContextVar("scope_unit", default=None)
_lock = threading.Lock()
_outside: dict[str, tuple[float, Versions]] = {}  # workspace -> (read at, versions), outside a unit


def _forget_outside() -> None:
    with _lock:
        _outside.clear()


process_state.enrol("core.store.scope_versions", _forget_outside)


# Items of the workspace's region a context asks to be read with the request's scope (``read_alongside``):
# each a function of the workspace id giving (table name, key). No extra call: they join the batch read the
# request makes anyway in that region (``core.tenancy``).
_alongside: list[Callable[[str], tuple[str, dict[str, Any]]]] = []


def read_alongside(item_of: Callable[[str], tuple[str, dict[str, Any]]]) -> None:
    """Have ``item_of(workspace_id)`` read with every request's scope in the workspace's region; its
    reader takes it with ``alongside`` (the gateway's catalog version: the check every catalog read makes)."""
    if item_of not in _alongside:
        _alongside.append(item_of)


def alongside_keys(workspace_id: str) -> dict[str, dict[str, Any]]:
    """The tables and keys to read with the scope of ``workspace_id``."""
    return dict(item_of(workspace_id) for item_of in _alongside)


def keep_alongside(region: str, workspace_id: str, found: dict[str, list[dict[str, Any]]]) -> None:
    """Keep, for the unit of work, what a batch read of ``alongside_keys`` found in ``region``."""
    for table_name in alongside_keys(workspace_id):
        unit_put(("along", table_name, workspace_id), (region, next(iter(found.get(table_name, [])), None)))


def alongside(table_name: str, region: str, workspace_id: str) -> tuple[bool, dict[str, Any] | None]:
    """The item of ``table_name`` read with this unit's scope in ``region``: (found, raw item or None)."""
    found, value = unit_get(("along", table_name, workspace_id))
    if not found or value[0] != region:
        return False, None
    return True, value[1]


def drop_alongside(table_name: str, workspace_id: str) -> None:
    """Forget the item read with the scope (this unit wrote it)."""
    u = _unit.get()
    if u is not None:
        u.pop(("along", table_name, workspace_id), None)


def table() -> str:
    return aws.table_name(TABLE)


def key(workspace_id: str) -> dict[str, Any]:
    return {"jti": {"S": f"scope:{workspace_id}"}}


def parse(item: dict[str, Any] | None) -> Versions:
    """The counters of a raw item (0 for a piece never bumped, or no item at all)."""
    item = item or {}
    return {p: int(item.get(p, {}).get("N", 0)) for p in PIECES}


def _ddb() -> Any:
    return aws.client("dynamodb", settings().global_region)


@contextmanager
def unit() -> Iterator[None]:
    """A unit of work (one request, one queue delivery): the version item is read at most once inside."""
    if _unit.get() is not None:
        yield  # nested: the outer unit's reads stand
        return
    token = _unit.set({})
    try:
        yield
    finally:
        _unit.reset(token)


def in_unit() -> bool:
    return _unit.get() is not None


def unit_get(name: Hashable) -> tuple[bool, Any]:
    """What the current unit of work already read under ``name``: (found, value)."""
    u = _unit.get()
    if u is None or name not in u:
        return False, None
    return True, u[name]


def unit_put(name: Hashable, value: Any) -> None:
    u = _unit.get()
    if u is not None:
        u[name] = value


def unit_drop(kind: str) -> None:
    """Forget what the current unit of work read under names ``(kind, ...)`` (after a write of them)."""
    u = _unit.get()
    if u is not None:
        for name in [n for n in u if isinstance(n, tuple) and n and n[0] == kind]:
            del u[name]


def seen(workspace_id: str, versions: Versions) -> None:
    """Record the versions a batch read of the request found (``core.tenancy.begin_request``)."""
    unit_put(("v", workspace_id), versions)


def current(workspace_id: str) -> Versions:
    """The counters of a workspace (or a user) as of this unit of work (read once per unit; one consistent GetItem)."""
    found, versions = unit_get(("v", workspace_id))
    if found:
        return versions  # type: ignore[no-any-return]
    if in_unit():
        versions = _read(workspace_id)
        seen(workspace_id, versions)
        return versions  # type: ignore[no-any-return]
    now = clock.now()
    hit = _outside.get(workspace_id)
    if hit is not None and now - hit[0] < OUTSIDE_UNIT_SECONDS:
        return hit[1]
    versions = _read(workspace_id)
    with _lock:
        if len(_outside) > 10_000:
            _outside.clear()
        _outside[workspace_id] = (now, versions)
    return versions  # type: ignore[no-any-return]


def _read(workspace_id: str) -> Versions:
    answer = _ddb().get_item(TableName=table(), Key=key(workspace_id), ConsistentRead=True)
    return parse(answer.get("Item"))


def bump(workspace_id: str, *pieces: str) -> Versions:
    """Move the counters of ``pieces`` on (call it after the piece's write): every container reads the
    piece again from its next unit of work on, this one from its next read of the piece."""
    names = {f"#p{i}": p for i, p in enumerate(pieces)}
    answer = _ddb().update_item(
        TableName=table(), Key=key(workspace_id), UpdateExpression="ADD " + ", ".join(f"{n} :one" for n in names),
        ExpressionAttributeNames=names, ExpressionAttributeValues={":one": {"N": "1"}}, ReturnValues="ALL_NEW")
    versions = parse(answer.get("Attributes"))
    if in_unit():
        seen(workspace_id, versions)
    with _lock:
        _outside.pop(workspace_id, None)
    return versions


class VersionedCache(Generic[V]):
    """Values of one piece per workspace (and sub-key), valid while the piece's counter has not moved (and,
    with ``max_age``, for at most that many seconds: a bound for writes that may not bump)."""

    def __init__(self, name: str, piece: str, size: int = 4096, max_age: float | None = None) -> None:
        self.piece = piece
        self.size = size
        self.max_age = max_age
        self._data: dict[Hashable, tuple[int, float, V]] = {}
        self._lock = threading.Lock()
        process_state.enrol(name, self.clear)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def get(self, workspace_id: str, load: Callable[[], V], sub: Hashable = None) -> V:
        """The cached value, or ``load()`` (run after the counter was read, so a write racing with it is
        seen by the next unit of work at the latest)."""
        version = current(workspace_id)[self.piece]
        now = clock.now()
        hit = self._data.get((workspace_id, sub))
        if hit is not None and hit[0] == version and (self.max_age is None or now - hit[1] < self.max_age):
            return hit[2]
        value = load()
        with self._lock:
            if len(self._data) >= self.size:
                self._data.clear()
            self._data[(workspace_id, sub)] = (version, now, value)
        return value
