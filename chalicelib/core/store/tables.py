"""PynamoDB model factory: attributes on a base class, one concrete class per region.

A PynamoDB model class keeps its connection, so the region cannot change per call; ``regional`` and
``global_model`` build (once) the concrete class bound to a region and to the declared table name.
"""
from __future__ import annotations

from typing import TypeVar

from pynamodb.connection import Connection
from pynamodb.models import Model

from chalicelib.core.aws import table_name
from chalicelib.core.config import settings
from chalicelib.core.process_state import cached
from chalicelib.core.regions import check_client_region

M = TypeVar("M", bound=Model)


class BaseModel(Model):
    """Marker base: subclasses declare attributes and ``TABLE`` (the declared logical table name)."""

    TABLE = ""


@cached(maxsize=256, derived=True)
def _bind(base: type, region: str, table: str) -> type:
    meta = type("Meta", (), {"table_name": table, "region": region, "max_retry_attempts": 4})
    return type(f"{base.__name__}_{region.replace('-', '_')}", (base,), {"Meta": meta})


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
    return Connection(region=region, max_retry_attempts=4)


