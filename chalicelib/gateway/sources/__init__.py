"""Source readers, one module per connector kind. Each module provides:

- ``FIELDS``: the config fields (``core.validation.F``) and ``SECRETS``: which of them are secrets;
- ``check_config(config) -> list[{field, message}]``: checks beyond types (optional);
- ``health(src) -> None``: raises ``SourceError`` when the source cannot be reached;
- ``read(src, cursor, mode) -> Batch``: what changed since ``cursor`` (INCREMENTAL) or everything.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any


class SourceError(Exception):
    """The source could not be read; the message is safe to show to an admin (no secrets)."""


@dataclass(frozen=True)
class Src:
    """What a reader needs: where the workspace lives and the connector's (decrypted) config."""

    region: str
    workspace_id: str
    connector_id: str
    config: dict[str, Any]


@dataclass
class Record:
    key: str  # identity of the row within the dataset (primary key, or object#line)
    values: dict[str, Any]
    source: str | None = None  # the object the row came from (s3, documents), for replacement
    untyped: bool = False  # string values may hold numbers/booleans/dates (CSV): sniff them


@dataclass
class Batch:
    records: list[Record]
    cursor: dict[str, Any]  # the position to save once this batch is committed
    rows_read: int
    complete: bool = False  # True: the batch is the whole source; keys absent from it are deleted
    replaced_sources: set[str] = field(default_factory=set)  # old rows from these sources are dropped
    primary_key: list[str] | None = None
    skipped: list[str] = field(default_factory=list)  # objects that could not be parsed (named, not fatal)


_MODULES = {"s3": "s3_objects", "dynamodb": "dynamodb_table", "http": "http_api", "documents": "documents"}


def module(kind: str) -> ModuleType:
    return importlib.import_module(f"chalicelib.gateway.sources.{_MODULES[kind]}")
