"""Normalising source records to a dataset schema: column names, type inference (then stable, only
ever widened), classification (``classification.py``), and coercion of values to the chosen types.

Types widen so no value is lost: INTEGER+FLOAT -> FLOAT, DATE+TIMESTAMP -> TIMESTAMP, anything else
mixed -> STRING. A column seen once stays in the schema (later rows without it hold null).
"""
from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Iterable
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from chalicelib.gateway.ingest.classification import classify
from chalicelib.gateway.vocabulary import DEFAULT_POLICY

INT_RE = re.compile(r"^-?(?:0|[1-9]\d{0,17})$")
FLOAT_RE = re.compile(r"^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?$|^-?\.\d+$")
DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
TS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|z|[+-]\d{2}:?\d{2})?$")
INT64 = 2**63 - 1

# --- column names --------------------------------------------------------------------------------
def column_name(source_name: str) -> str:
    """A SQL-friendly column name: lower snake case, starting with a letter, never with ``_``."""
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", str(source_name).strip())
    name = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    if not name:
        name = "column"
    if not name[0].isalpha():
        name = "c_" + name
    return name[:63]


# --- types ---------------------------------------------------------------------------------------
def infer(value: Any, untyped: bool) -> str | None:
    """The type a single value asks for (None for null)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int):
        return "INTEGER" if -INT64 <= value <= INT64 else "STRING"
    if isinstance(value, float):
        return "FLOAT" if math.isfinite(value) else "STRING"
    if isinstance(value, Decimal):
        return "INTEGER" if value == value.to_integral_value() and abs(value) <= INT64 else "FLOAT"
    if isinstance(value, datetime):
        return "TIMESTAMP"
    if isinstance(value, date):
        return "DATE"
    if isinstance(value, (dict, list, tuple)):
        return "JSON"
    if isinstance(value, (bytes, bytearray)):
        return "STRING"
    s = str(value)
    if untyped:
        if INT_RE.match(s):
            return "INTEGER"
        if FLOAT_RE.match(s) and not re.match(r"^-?0\d", s):
            return "FLOAT"
        if s.lower() in ("true", "false"):
            return "BOOLEAN"
    if DATE_RE.match(s):
        try:
            date.fromisoformat(s)
            return "DATE"
        except ValueError:
            return "STRING"
    if TS_RE.match(s) and _parse_ts(s) is not None:
        return "TIMESTAMP"
    return "STRING"


def widen(a: str | None, b: str | None) -> str | None:
    """The narrowest type holding both."""
    if a is None or a == b:
        return b if a is None else a
    if b is None:
        return a
    pair = {a, b}
    if pair == {"INTEGER", "FLOAT"}:
        return "FLOAT"
    if pair == {"DATE", "TIMESTAMP"}:
        return "TIMESTAMP"
    return "STRING"


def _parse_ts(s: str) -> datetime | None:
    try:
        dt = datetime.fromisoformat(s.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is not None:
        dt = dt.astimezone(UTC).replace(tzinfo=None)
    return dt


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return repr(value)
    return str(value)


def coerce(value: Any, typ: str) -> Any:
    """``value`` as the JSON value DuckDB reads into the column type (see ``DUCKDB_TYPES``)."""
    if value is None:
        return None
    if typ == "STRING":
        return value if type(value) is str else _text(value)
    if typ == "INTEGER":
        return int(value) if not isinstance(value, str) else int(value)
    if typ == "FLOAT":
        return float(value)
    if typ == "BOOLEAN":
        return value if isinstance(value, bool) else str(value).lower() == "true"
    if typ == "TIMESTAMP":
        if isinstance(value, datetime):
            dt = value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
        elif isinstance(value, date):
            dt = datetime(value.year, value.month, value.day)
        else:
            dt = _parse_ts(str(value)) or datetime.fromisoformat(str(value))
        return dt.strftime("%Y-%m-%d %H:%M:%S.%f")
    if typ == "DATE":
        return value.isoformat() if isinstance(value, date) else str(value)[:10]
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)  # JSON


# --- schema planning -------------------------------------------------------------------------------
class Observer:
    """Collects what the rows of a sync say about each column (name, widened type, nulls, presence,
    samples), row by row (``add_rows``) or a whole column at a time (``add_column``, for objects read
    natively); ``finish`` turns it into the schema. Columns are named in order of first appearance."""

    def __init__(self, old_schema: list[dict[str, Any]]) -> None:
        self.old_schema = old_schema
        self.by_source = {f.get("source_name", f["name"]): f["name"] for f in old_schema}
        self.taken = {f["name"] for f in old_schema}
        self.seen_types: dict[str, str | None] = {}
        self.samples: dict[str, list[Any]] = {}
        self.nulls: dict[str, bool] = {}
        self.present: dict[str, int] = {}
        self.memo: dict[tuple[str, bool], str | None] = {}
        self.count = 0

    def column(self, src_name: str) -> str:
        """The column a source name maps to (a new, unique name the first time it is seen)."""
        col = self.by_source.get(src_name)
        if col is None:
            col = column_name(src_name)
            base, n = col, 2
            while col in self.taken:
                col, n = f"{base[:59]}_{n}", n + 1
            self.by_source[src_name] = col
            self.taken.add(col)
        return col

    def type_of(self, src_name: str) -> str | None:
        """The type seen so far for a source column (None: nothing but nulls yet, or not seen)."""
        col = self.by_source.get(src_name)
        if col is None:
            return None
        return self.seen_types.get(col) or next((f["type"] for f in self.old_schema if f["name"] == col), None)

    def add_column(self, src_name: str, typ: str | None, present: int, has_null: bool, samples: list[Any]) -> None:
        """A column of ``present`` rows read natively: its widened type over them, whether any was null
        and its first non-null values in row order. Call ``add_count`` once per object too."""
        col = self.column(src_name)
        self.present[col] = self.present.get(col, 0) + present
        if has_null:
            self.nulls[col] = True
        if typ is not None:
            current = self.seen_types.get(col)
            self.seen_types[col] = typ if current is None else widen(current, typ)
        bucket = self.samples.setdefault(col, [])
        bucket.extend(samples[:200 - len(bucket)])

    def add_count(self, rows: int) -> None:
        self.count += rows

    def add_rows(self, rows: Iterable[tuple[dict[str, Any], bool]]) -> None:
        """Rows as ``(values, untyped)``."""
        seen_types, samples, nulls, present, memo = self.seen_types, self.samples, self.nulls, self.present, self.memo
        by_source = self.by_source
        for values, untyped in rows:
            self.count += 1
            for src_name, v in values.items():
                col = by_source.get(src_name) or self.column(src_name)
                present[col] = present.get(col, 0) + 1
                if v is None:
                    nulls[col] = True
                    continue
                current = seen_types.get(col)
                if current != "STRING":  # STRING absorbs everything: no need to look further
                    if type(v) is str:
                        memo_key = (v, untyped)
                        t = memo.get(memo_key)
                        if t is None:
                            t = infer(v, untyped)
                            if len(memo) < 200_000:
                                memo[memo_key] = t
                    else:
                        t = infer(v, untyped)
                    seen_types[col] = t if current is None or current == t else widen(current, t)
                bucket = samples.setdefault(col, [])
                if len(bucket) < 200:
                    bucket.append(v)

    def finish(self, at: str, version: int) -> tuple[list[dict[str, Any]], dict[str, Any] | None, dict[str, str]]:
        """(schema, drift or None, source name -> column name). Existing fields keep their
        classification, policy and description."""
        old_schema, count = self.old_schema, self.count
        schema = [dict(f) for f in old_schema]
        index = {f["name"]: f for f in schema}
        added, changed = [], []
        for col in index:
            if count and (self.nulls.get(col) or self.present.get(col, 0) < count):
                index[col]["nullable"] = True
        for src_name, col in self.by_source.items():
            if col in index:
                field = index[col]
                new_type = widen(field["type"], self.seen_types.get(col))
                if new_type != field["type"]:
                    changed.append({"name": col, "from": field["type"], "to": new_type})
                    field["type"] = new_type
                continue
            cls = classify(src_name, self.samples.get(col, []))
            nullable = bool(self.nulls.get(col)) or self.present.get(col, 0) < count or bool(old_schema)
            field = {"name": col, "type": self.seen_types.get(col) or "STRING", "nullable": nullable,
                     "classification": cls, "policy": DEFAULT_POLICY[cls], "description": "",
                     "source_name": src_name}
            schema.append(field)
            index[col] = field
            added.append({"name": col, "type": field["type"], "classification": cls})
        drift = None
        if old_schema and (added or changed):
            drift = {"version": version + 1, "at": at, "added": added, "changed": changed}
        return schema, drift, dict(self.by_source)


def plan(old_schema: list[dict[str, Any]], rows: Iterable[tuple[dict[str, Any], bool]], at: str,
         version: int) -> tuple[list[dict[str, Any]], dict[str, Any] | None, dict[str, str]]:
    """Schema after seeing ``rows`` (``(values, untyped)``): returns (schema, drift or None,
    source name -> column name). Existing fields keep their classification, policy and description."""
    observer = Observer(old_schema)
    observer.add_rows(rows)
    return observer.finish(at, version)
