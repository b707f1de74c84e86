"""DuckDB connections and the SQL text helpers the snapshot modules share."""
from __future__ import annotations

from typing import Any

from chalicelib.gateway.vocabulary import DUCKDB_TYPES

INTERNAL = ("_key", "_source", "_hash")  # the internal columns every snapshot file holds
HASH = "CAST(_hash AS UBIGINT) AS _hash"  # a file's row hashes, whichever way it stored them


def connect(workdir: str) -> Any:
    """An in-memory DuckDB whose spill and home directories are ``workdir`` (Lambda: only /tmp is
    writable and HOME may be unset)."""
    import duckdb  # noqa: PLC0415

    return duckdb.connect(config={"temp_directory": workdir, "home_directory": workdir})


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def files_sql(paths: list[str]) -> str:
    return "[" + ", ".join(sql_literal(p) for p in paths) + "]"


def sql_literal(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def no_rows(spec: dict[str, str]) -> str:
    """SQL: no rows, with the columns of ``spec``."""
    return "SELECT " + ", ".join(f"CAST(NULL AS {t}) AS {ident(n)}" for n, t in spec.items()) + " WHERE false"


def ranges_sql(ranges: list[tuple[int, str, str]]) -> str:
    """SQL: a relation ``r(i, lo, hi)`` of the parts' numbers and key ranges."""
    return f"(SELECT * FROM (VALUES {', '.join(f'({i}, {sql_literal(lo)}, {sql_literal(hi)})' for i, lo, hi in ranges)}) r(i, lo, hi))"


def column_types(schema: list[dict[str, Any]]) -> dict[str, str]:
    return {"_key": "VARCHAR", "_source": "VARCHAR", "_hash": "UBIGINT",
            **{f["name"]: DUCKDB_TYPES[f["type"]] for f in schema}}
