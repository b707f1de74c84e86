"""PynamoDB model factory: attributes on a base class, one concrete class per region.

A PynamoDB model class keeps its connection, so the region cannot change per call; ``regional`` and
``global_model`` build (once) the concrete class bound to a region and to the declared table name.
"""
from __future__ import annotations

from typing import Any, TypeVar

from pynamodb.connection import Connection
from pynamodb.models import Model

from chalicelib.core.aws import botocore_session, shared_session_lock, table_name
from chalicelib.core.config import settings
from chalicelib.core.process_state import cached
from chalicelib.core.regions import check_client_region

M = TypeVar("M", bound=Model)


class BaseModel(Model):
    """Marker base: subclasses declare attributes and ``TABLE`` (the declared logical table name)."""

    TABLE = ""


def _with_shared_session(conn: Connection) -> Connection:
    """``conn`` with its DynamoDB client made now from the process's one botocore session. Left alone,
    PynamoDB gives every connection (one per model class) a session of its own, and each new session parses
    botocore's DynamoDB model again: the first request of a process touching a dozen tables paid that a
    dozen times (seconds on a loaded machine). The client stays on the connection for every thread."""
    session = botocore_session()
    with shared_session_lock():
        conn._local.session = session  # read by ``Connection.client`` when it makes the client, just below
        try:
            conn.client  # noqa: B018 - made and kept on the connection
        finally:
            conn._local.session = None
    return conn


@cached(maxsize=256, derived=True)
def _bind(base: type, region: str, table: str) -> type:
    meta = type("Meta", (), {"table_name": table, "region": region, "max_retry_attempts": 4})
    cls = type(f"{base.__name__}_{region.replace('-', '_')}", (base,), {"Meta": meta})
    _with_shared_session(cls._get_connection().connection)  # type: ignore[attr-defined]
    return cls


def regional(base: type[M], region: str) -> type[M]:
    """The concrete class of ``base`` stored in ``region``; refused in a deployment pinned to another region."""
    check_client_region(region)
    return _bind(base, region, table_name(base.TABLE))  # type: ignore[attr-defined,return-value]


def global_model(base: type[M]) -> type[M]:
    """The concrete class of a global-by-design model (directory data, in the global region)."""
    return _bind(base, settings().global_region, table_name(base.TABLE))  # type: ignore[attr-defined,return-value]


def connection(region: str) -> Connection:
    """A PynamoDB connection for transactions in ``region``, made once (each new one reloads botocore's models)."""
    check_client_region(region)
    return _connection(region)


def global_connection() -> Connection:
    """The connection for transactions on global tables (the directory), reachable from every region."""
    region = settings().global_region
    check_client_region(region, regional=False)
    return _connection(region)


@cached(maxsize=8, derived=True)
def _connection(region: str) -> Connection:
    return _with_shared_session(Connection(region=region, max_retry_attempts=4))




def get_together(region: str, wanted: list[tuple[type[Model], str, str | None]]) -> list[Model | None]:
    """Items of several tables of ``region`` in ONE consistent ``BatchGetItem``: per (model class of
    ``regional``, hash key, range key or None), the item or None when absent (at most 100 keys)."""
    request: dict[str, Any] = {}
    keyed: list[tuple[str, dict[str, Any]]] = []
    for cls, hash_key, range_key in wanted:
        key = _key(cls, hash_key, range_key)
        table = cls.Meta.table_name
        keys = request.setdefault(table, {"Keys": [], "ConsistentRead": True})["Keys"]
        if key not in keys:
            keys.append(key)
        keyed.append((table, key))
    found = batch_get(connection(region).client, request)
    if found is None:
        raise RuntimeError("DynamoDB left keys unprocessed five times")
    out: list[Model | None] = []
    for (cls, _, _), (table, key) in zip(wanted, keyed, strict=True):
        raw = next((i for i in found.get(table, []) if all(i.get(k) == v for k, v in key.items())), None)
        out.append(cls.from_raw_data(raw) if raw is not None else None)
    return out


def _key(cls: type[Model], hash_key: str, range_key: str | None) -> dict[str, Any]:
    attr = cls._hash_key_attribute()
    key = {attr.attr_name: {attr.attr_type: attr.serialize(hash_key)}}
    if range_key is not None:
        rattr = cls._range_key_attribute()
        key[rattr.attr_name] = {rattr.attr_type: rattr.serialize(range_key)}
    return key


def batch_get(client: Any, request: dict[str, Any]) -> dict[str, list[dict[str, Any]]] | None:
    """One ``BatchGetItem`` (its unprocessed keys asked again, up to 5 times): the raw items found per table,
    or None when some were still left."""
    found: dict[str, list[dict[str, Any]]] = {}
    for _ in range(5):
        answer = client.batch_get_item(RequestItems=request)
        for table, items in answer.get("Responses", {}).items():
            found.setdefault(table, []).extend(items)
        request = answer.get("UnprocessedKeys") or {}
        if not request:
            return found
    return None
