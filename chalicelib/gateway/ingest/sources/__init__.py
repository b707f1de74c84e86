"""Source readers, one module per connector kind. Each module provides:

- ``FIELDS``: the config fields (``core.http.validation.F``) and ``SECRETS``: which of them are secrets;
- ``check_config(config) -> list[{field, message}]``: checks beyond types (optional);
- ``health(src) -> None``: raises ``SourceError`` when the source cannot be reached;
- ``read(src, cursor, mode) -> Batch``: what changed since ``cursor`` (INCREMENTAL) or everything.
"""
from __future__ import annotations

import importlib
import os
import pickle
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from chalicelib.gateway.ingest.normalize import column_name
from chalicelib.gateway.vocabulary import CONNECTOR_KINDS


class SourceError(Exception):
    """The source could not be read; the message is safe to show to an admin (no secrets).

    ``permanent``: retrying cannot help until someone changes the source or the connector (missing
    bucket or table, denied access, bad configuration, an unreadable file): the sync fails at once."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


# AWS error codes no retry can fix: the bucket/table/key is missing, or the role may not read it.
PERMANENT_AWS_CODES = frozenset({
    "NoSuchBucket", "NoSuchKey", "InvalidBucketName", "AccessDenied", "AccessDeniedException", "AllAccessDisabled",
    "ResourceNotFoundException", "ValidationException", "InvalidClientTokenId", "UnrecognizedClientException",
    "InvalidAccessKeyId", "SignatureDoesNotMatch", "NotFound", "NoSuchEntity", "403", "404",
})


def aws_source_error(message: str, code: str) -> SourceError:
    """A SourceError for an AWS error code, permanent when retrying cannot help."""
    return SourceError(f"{message}: {code}", permanent=code in PERMANENT_AWS_CODES)


@dataclass(frozen=True)
class Src:
    """What a reader needs: where the workspace lives and the connector's (decrypted) config."""

    region: str
    workspace_id: str
    connector_id: str
    config: dict[str, Any]
    # called by readers as they go with (objects read, rows read) so far; the sync worker shows it on the run
    progress: Callable[[int, int], None] | None = field(default=None, compare=False)

    def report(self, objects: int, rows: int) -> None:
        if self.progress is not None:
            self.progress(objects, rows)


@dataclass
class Record:
    key: str  # identity of the row within the dataset (primary key, or object#line)
    values: dict[str, Any]
    source: str | None = None  # the object the row came from (s3, documents), for replacement
    untyped: bool = False  # string values may hold numbers/booleans/dates (CSV): sniff them


SPOOL_BATCH = 5_000  # records a reader holds in memory before writing them to its spool file


class RecordSpool:
    """Records a reader appends one at a time (DynamoDB, HTTP), written to a local file in batches of
    ``SPOOL_BATCH`` so the reader's memory stays bounded whatever the row count; iterated, in order, as
    often as needed. Only this process writes and reads the file (pickle of its own values)."""

    def __init__(self) -> None:
        fd, self.path = tempfile.mkstemp(prefix="gwspool-")
        self._fh = os.fdopen(fd, "wb")
        self._buffer: list[Record] = []
        self._count = 0

    def append(self, record: Record) -> None:
        self._buffer.append(record)
        self._count += 1
        if len(self._buffer) >= SPOOL_BATCH:
            self._flush()

    def _flush(self) -> None:
        if self._buffer:
            pickle.dump(self._buffer, self._fh, protocol=pickle.HIGHEST_PROTOCOL)
            self._buffer = []
        self._fh.flush()

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Record]:
        self._flush()
        with open(self.path, "rb") as fh:
            while True:
                try:
                    batch = pickle.load(fh)  # noqa: S301 - this process's own file
                except EOFError:
                    return
                yield from batch

    def close(self) -> None:
        self._fh.close()
        if os.path.exists(self.path):
            os.remove(self.path)


@dataclass
class CsvFile:
    """A CSV, JSON Lines or Parquet object downloaded to local disk, to be parsed, typed and keyed natively
    (see ``gateway/ingest/typed_rows.py``). ``fallback`` parses it row by row into Records exactly as the reader would
    have (used when the native reader refuses the file: ragged rows, bad encoding, duplicate headers, values
    whose Python typing the native rules do not reproduce)."""

    source: str  # the object key (the rows' ``_source``)
    path: str
    delimiter: str
    order: int  # position among the batch's objects: later objects win on duplicate keys
    primary_key: list[str] | None
    fallback: Callable[[], list[Record]]
    format: str = "csv"  # csv | jsonl | parquet


@dataclass
class Batch:
    records: list[Record] | RecordSpool
    cursor: dict[str, Any]  # the position to save once this batch is committed
    rows_read: int
    complete: bool = False  # True: the batch is the whole source; keys absent from it are deleted
    replaced_sources: set[str] = field(default_factory=set)  # old rows from these sources are dropped
    primary_key: list[str] | None = None
    skipped: list[str] = field(default_factory=list)  # objects that could not be parsed (named, not fatal)
    files: list[CsvFile] = field(default_factory=list)  # objects read natively (their rows are not in records)
    source_order: dict[str, int] = field(default_factory=dict)  # object key -> position (records' sources)
    cleanup: Callable[[], None] = field(default=lambda: None)  # removes the local copies of ``files``


def missing_key(key: str, line: int, missing: list[str]) -> SourceError:
    """The error for a row without a value for (part of) the primary key."""
    return SourceError(f"{key} row {line} has no value for primary key {', '.join(missing)}", permanent=True)


class SourceReader(Protocol):
    """What a reader module of ``sources/`` provides. Optional hooks, called when present:
    ``canonical(config, region)`` (the config in canonical form), ``check_config(config)`` (problems beyond
    ``FIELDS``), ``prepare(src)`` (after create), ``cleanup(src)`` (after delete; objects removed)."""

    FIELDS: dict[str, Any]  # the config's fields (core.http.validation)
    SECRETS: tuple[str, ...]  # config fields kept as KMS ciphertext and never returned

    def health(self, src: Src) -> None: ...

    def read(self, src: Src, cursor: dict[str, Any] | None, mode: str) -> Batch: ...


def module(kind: str) -> SourceReader:
    """The reader of connector ``kind`` (``vocabulary.CONNECTOR_KINDS``)."""
    return cast(SourceReader, importlib.import_module(f"{__name__}.{CONNECTOR_KINDS[kind].module}"))


def resolve_columns(names: list[str], headers: Iterable[str]) -> list[str]:
    """The source header each configured column name means: the header itself, or the one whose
    normalised name (``normalize.column_name``, e.g. ``employee_id`` for "Employee ID") it is."""
    headers = list(headers)
    by_column = {}
    for h in headers:
        by_column.setdefault(column_name(h), h)
    return [n if n in headers else by_column.get(column_name(n), n) for n in names]
