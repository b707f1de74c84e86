"""``s3`` connector: CSV, JSON Lines and Parquet objects under a bucket/prefix of the workspace's region,
read as the role the workspace grants (``role_arn``; see ``gateway/ingest/source_access.py``).

Incremental by object: the cursor holds each object's ETag; a sync reads new and changed objects only,
drops the rows of changed and deleted objects and adds the new ones. Without ``primary_key`` a row's
identity is ``<object key>#<line>``; with it, rows are merged by that key across objects.
"""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from chalicelib.core.http.validation import F
from chalicelib.gateway.ingest import source_access, source_names
from chalicelib.gateway.ingest.sources import (
    Batch,
    CsvFile,
    Record,
    SourceError,
    Src,
    aws_source_error,
    missing_key,
    resolve_columns,
)
from chalicelib.gateway.storage import connect

FORMATS = ("auto", "csv", "jsonl", "parquet")
EXTENSIONS = {".csv": "csv", ".tsv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl",
              ".parquet": "parquet"}
MAX_OBJECTS = 10_000
MAX_OBJECT_BYTES = 256 * 1024 * 1024
FIELDS = {
    "role_arn": F(str, required=True, min_len=20, max_len=2048),
    "bucket": F(str, required=True, min_len=3, max_len=2048),
    "prefix": F(str, max_len=1024),
    "format": F(str, enum=FORMATS),
    "primary_key": F(list, min_len=1, max_len=8),
    "csv_delimiter": F(str, min_len=1, max_len=1),
}
SECRETS: tuple[str, ...] = ()


def canonical(config: dict[str, Any], region: str) -> dict[str, Any]:
    """The config with ``role_arn`` and ``bucket`` in canonical form (``source_names.Refused`` otherwise)."""

    return {**config, "role_arn": source_names.role(config["role_arn"], platform_account=source_access.platform_account()),
            "bucket": source_names.bucket(config["bucket"])}


def check_config(config: dict[str, Any]) -> list[dict[str, str]]:
    problems = []
    pk = config.get("primary_key")
    if pk is not None and not all(isinstance(k, str) and 0 < len(k) <= 128 for k in pk):
        problems.append({"field": "primary_key", "message": "must be a list of column names"})
    return problems


def _client_error(err: ClientError, what: str) -> SourceError:
    return aws_source_error(what, err.response.get("Error", {}).get("Code", "error"))


def _s3(src: Src) -> Any:

    return source_access.client(src, "s3")


def health(src: Src) -> None:
    try:
        _s3(src).list_objects_v2(Bucket=src.config["bucket"], Prefix=src.config.get("prefix", ""),
                                                     MaxKeys=1)
    except ClientError as err:
        raise _client_error(err, f"cannot list s3://{src.config['bucket']}") from None


def list_objects(s3: Any, bucket: str, prefix: str, accept: Callable[[str], bool]) -> dict[str, dict[str, Any]]:
    """``{key: {etag, size, last_modified}}`` of the accepted objects under the prefix (``s3``: the client
    to read with)."""
    out: dict[str, dict[str, Any]] = {}
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                if obj["Key"].endswith("/") or not accept(obj["Key"]):
                    continue
                out[obj["Key"]] = {"etag": obj["ETag"].strip('"'), "size": obj["Size"],
                                   "last_modified": obj["LastModified"]}
                if len(out) > MAX_OBJECTS:
                    raise SourceError(f"more than {MAX_OBJECTS} objects under the prefix", permanent=True)
    except ClientError as err:
        raise _client_error(err, f"cannot list s3://{bucket}") from None
    return out


def diff(listing: dict[str, dict[str, Any]], cursor: dict[str, Any] | None, mode: str) -> tuple[list[str], list[str]]:
    """(objects to read, objects deleted since the cursor)."""
    seen: dict[str, str] = (cursor or {}).get("objects", {}) if mode == "INCREMENTAL" else {}
    changed = sorted(k for k, meta in listing.items() if seen.get(k) != meta["etag"])
    deleted = sorted(k for k in seen if k not in listing)
    return changed, deleted


def fetch(s3: Any, bucket: str, key: str) -> bytes:
    try:
        obj = s3.get_object(Bucket=bucket, Key=key)
        if obj["ContentLength"] > MAX_OBJECT_BYTES:
            raise SourceError(f"{key} is larger than {MAX_OBJECT_BYTES // (1024 * 1024)} MiB", permanent=True)
        return obj["Body"].read()
    except ClientError as err:
        raise _client_error(err, f"cannot read s3://{bucket}/{key}") from None


def _format_of(key: str, configured: str) -> str | None:
    if configured != "auto":
        return configured
    return EXTENSIONS.get(os.path.splitext(key.lower())[1])


def parse_csv(data: bytes, delimiter: str) -> list[dict[str, Any]]:
    text = data.decode("utf-8-sig")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    header = next(reader, None)
    if not header:
        return []
    width = len(header)
    rows = []
    for line in reader:
        if not line:
            continue
        if len(line) < width:
            line = line + [""] * (width - len(line))
        row = {k: (v if v != "" else None) for k, v in zip(header, line[:width])}  # noqa: B905
        for i, extra in enumerate(line[width:], start=width + 1):  # fields beyond the header are kept
            row[f"extra_{i}"] = extra if extra != "" else None
        rows.append(row)
    return rows


def parse_jsonl(data: bytes, key: str) -> list[dict[str, Any]]:
    text = data.decode("utf-8-sig").strip()
    if text.startswith("["):  # a JSON array of objects is accepted too
        rows = json.loads(text)
    else:
        rows = []
        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    raise SourceError(f"{key} line {n} is not valid JSON", permanent=True) from None
    if not all(isinstance(r, dict) for r in rows):
        raise SourceError(f"{key} holds a JSON value that is not an object", permanent=True)
    return rows


def parse_parquet(data: bytes) -> list[dict[str, Any]]:

    with tempfile.TemporaryDirectory(prefix="gwpq-") as tmp:
        path = os.path.join(tmp, "object.parquet")
        with open(path, "wb") as fh:
            fh.write(data)
        con = connect(tmp)
        try:
            cur = con.execute("SELECT * FROM read_parquet(?)", [path])
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        finally:
            con.close()


def parse(data: bytes, fmt: str, key: str, delimiter: str) -> tuple[list[dict[str, Any]], bool]:
    """Rows of one object and whether their values are untyped strings (CSV)."""
    try:
        if fmt == "csv":
            return parse_csv(data, delimiter), True
        if fmt == "jsonl":
            return parse_jsonl(data, key), False
        return parse_parquet(data), False
    except UnicodeDecodeError:
        raise SourceError(f"{key} is not UTF-8 text", permanent=True) from None
    except SourceError:
        raise
    except Exception as err:
        raise SourceError(f"{key} could not be parsed as {fmt} ({type(err).__name__})", permanent=True) from None


def _records(key: str, rows: list[dict[str, Any]], untyped: bool, pk: list[str] | None) -> list[Record]:
    out = []
    for line, row in enumerate(rows, start=1):
        if pk:
            pk_cols = pk if all(k in row for k in pk) else resolve_columns(pk, row.keys())
            missing = [k for k, col in zip(pk, pk_cols) if row.get(col) in (None, "")]  # noqa: B905
            if missing:
                raise missing_key(key, line, missing)
            rkey = json.dumps([str(row[col]) for col in pk_cols])
        else:
            rkey = f"{key}#{line}"
        out.append(Record(rkey, row, source=key, untyped=untyped))
    return out


def _download(s3: Any, bucket: str, key: str, path: str) -> None:
    """The object to a local file, streamed (never whole in memory)."""
    try:
        obj = s3.get_object(Bucket=bucket, Key=key)
        if obj["ContentLength"] > MAX_OBJECT_BYTES:
            raise SourceError(f"{key} is larger than {MAX_OBJECT_BYTES // (1024 * 1024)} MiB", permanent=True)
        with open(path, "wb") as fh:
            shutil.copyfileobj(obj["Body"], fh, 1 << 20)
    except ClientError as err:
        raise _client_error(err, f"cannot read s3://{bucket}/{key}") from None


def read(src: Src, cursor: dict[str, Any] | None, mode: str) -> Batch:
    """Every object is downloaded for the native reader (``Batch.files``; it falls back to records per
    object when it cannot reproduce the row-by-row semantics)."""
    cfg = src.config
    bucket, prefix, configured = cfg["bucket"], cfg.get("prefix", ""), cfg.get("format", "auto")
    s3 = _s3(src)
    listing = list_objects(s3, bucket, prefix, lambda k: _format_of(k, configured) is not None)
    changed, deleted = diff(listing, cursor, mode)
    pk = cfg.get("primary_key")
    delimiter = cfg.get("csv_delimiter") or ","
    records: list[Record] = []
    files: list[CsvFile] = []
    tmp = tempfile.TemporaryDirectory(prefix="gws3-")
    try:
        for order, key in enumerate(changed):
            fmt = _format_of(key, configured) or "csv"
            delim = "\t" if key.lower().endswith(".tsv") and not cfg.get("csv_delimiter") else delimiter
            path = os.path.join(tmp.name, f"{order:05d}.{fmt}")
            _download(s3, bucket, key, path)

            def fallback(key: str = key, path: str = path, delim: str = delim, fmt: str = fmt) -> list[Record]:
                with open(path, "rb") as fh:
                    data = fh.read()
                rows, untyped = parse(data, fmt, key, delim)
                return _records(key, rows, untyped, pk)

            files.append(CsvFile(key, path, delim, order, pk, fallback, fmt))
    except BaseException:
        tmp.cleanup()
        raise
    return Batch(records=records, cursor={"objects": {k: m["etag"] for k, m in listing.items()}},
                 rows_read=len(records), complete=(mode == "FULL_REFRESH"),
                 replaced_sources=set(changed) | set(deleted), primary_key=pk, files=files,
                 source_order={k: i for i, k in enumerate(changed)}, cleanup=tmp.cleanup)
