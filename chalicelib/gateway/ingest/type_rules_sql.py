"""The project's typing rules (``normalize.infer``, ``normalize.coerce``) written as DuckDB SQL over text values.

Each function returns an SQL expression of a column holding text (a CSV value, or a JSON member's text and
JSON type): its ``CODES`` category, whether it is of a type, the value cast to a column type, its JSON text.
``typed_rows`` and ``native_objects`` build their queries from these; none of them runs SQL itself.
"""
from __future__ import annotations

from chalicelib.gateway.ingest import normalize
from chalicelib.gateway.storage import sql_literal

# normalize.INT_RE / FLOAT_RE / DATE_RE / TS_RE for RE2 (full match)
_INT = r"-?(?:0|[1-9]\d{0,17})"
_FLOAT = r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|-?\.\d+"
_DATE = r"\d{4}-\d{2}-\d{2}"
# TS_RE with the ranges ``datetime.fromisoformat`` checks (the day is checked by a DATE cast)
_TS = r"\d{4}-\d{2}-\d{2}[T ](?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:\.\d{1,6})?)?(?:Z|z|[+-](?:[01]\d|2[0-3]):?[0-5]\d)?"
_DATE_OR_TS = _DATE + "(?:" + _TS[len(_DATE):] + ")?"
CODES = {1: "INTEGER", 2: "FLOAT", 3: "BOOLEAN", 4: "DATE", 5: "TIMESTAMP", 6: "STRING"}
_PLAIN_JSON = r"[ !#-\[\]-~]*"  # printable ASCII without quote or backslash: json.dumps adds only quotes
# stops the snapshot writer where a sampled object's value breaks its sample's typing (``_observe_sampled``)
REFUTED = "error('a value past the sniffer''s sample refutes its typing')"


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def category(v: str) -> str:
    """SQL: the ``CODES`` code of ``normalize.infer(v, untyped=True)`` for a text value (NULL for null).
    Cheap tests first: a value that cannot start a number, boolean or date is text at once."""
    return (f"CASE WHEN {v} IS NULL THEN NULL WHEN NOT contains('-.0123456789tTfF', left({v}, 1)) THEN 6 "
            f"WHEN regexp_full_match({v}, {sql_literal(_INT)}) THEN 1 WHEN regexp_full_match({v}, {sql_literal(_FLOAT)}) THEN 2 "
            f"WHEN lower({v}) IN ('true', 'false') THEN 3 "
            f"WHEN length({v}) < 10 OR try_cast(left({v}, 10) AS DATE) IS NULL THEN 6 "
            f"WHEN length({v}) = 10 THEN CASE WHEN regexp_full_match({v}, {sql_literal(_DATE)}) THEN 4 ELSE 6 END "
            f"WHEN regexp_full_match({v}, {sql_literal(_TS)}) THEN 5 ELSE 6 END")


def is_of(v: str, typ: str) -> str:
    """SQL: whether a non-null text value's ``category`` lies within what widens to ``typ``."""
    date_ok = f"try_cast(left({v}, 10) AS DATE) IS NOT NULL"
    return {
        "INTEGER": f"regexp_full_match({v}, {sql_literal(_INT)})",
        "FLOAT": f"regexp_full_match({v}, {sql_literal(_FLOAT)})",  # (every INTEGER value matches it too)
        "BOOLEAN": f"lower({v}) IN ('true', 'false')",
        "DATE": f"(length({v}) = 10 AND regexp_full_match({v}, {sql_literal(_DATE)}) AND {date_ok})",
        "TIMESTAMP": f"({date_ok} AND ((length({v}) = 10 AND regexp_full_match({v}, {sql_literal(_DATE)})) "
                     f"OR regexp_full_match({v}, {sql_literal(_TS)})))",
    }[typ]


def accepts(v: str, typ: str) -> str:
    """SQL: ``is_of`` for a value that is also cast to ``typ`` (a DATE or TIMESTAMP whose day does not exist
    fails the cast instead)."""
    if typ == "DATE":
        return f"(length({v}) = 10 AND regexp_full_match({v}, {sql_literal(_DATE)}))"
    if typ == "TIMESTAMP":
        return f"regexp_full_match({v}, {sql_literal(_DATE_OR_TS)})"
    if typ == "INTEGER":  # ``_INT`` but "-0", without a regular expression: the integer's own text, 18 digits at most
        return (f"(length({v}) <= CASE WHEN starts_with({v}, '-') THEN 19 ELSE 18 END "
                f"AND CAST(TRY_CAST({v} AS BIGINT) AS VARCHAR) = {v})")
    return is_of(v, typ)


def type_of(mask: int | None) -> str | None:
    typ = None
    for code, name in CODES.items():
        if mask and mask & (1 << code):
            typ = name if typ is None else normalize.widen(typ, name)
    return typ


def typed(v: str, typ: str) -> str:
    """SQL: a text value as the column type (``normalize.coerce`` for text)."""
    if typ == "INTEGER":
        return f"CAST({v} AS BIGINT)"
    if typ == "FLOAT":
        return f"CAST({v} AS DOUBLE)"
    if typ == "BOOLEAN":
        return f"(lower({v}) = 'true')"
    if typ == "TIMESTAMP":  # with an offset: to UTC; else as written (the stage's time zone is UTC)
        return f"CAST(CAST(CASE WHEN suffix({v}, 'z') THEN rtrim({v}, 'z') ELSE {v} END AS TIMESTAMPTZ) AS TIMESTAMP)"
    if typ == "DATE":
        return f"CAST(left({v}, 10) AS DATE)"
    if typ == "JSON":
        return f"py_json_str({v})"
    return v


def json_str(v: str) -> str:
    """SQL: ``json.dumps(v)`` for a text value (Python only for values needing escapes)."""
    return f"CASE WHEN regexp_full_match({v}, {sql_literal(_PLAIN_JSON)}) THEN '\"' || {v} || '\"' ELSE py_json_str({v}) END"


def json_category(v: str, t: str) -> str:
    """SQL: the ``CODES`` code of ``normalize.infer(value, untyped=False)`` for a JSON value (text ``v``,
    JSON type ``t``): numbers by their JSON type (an integer beyond 64 bits is text), strings by the date
    and timestamp rules only."""
    integer = f"CASE WHEN try_cast({v} AS BIGINT) IS NOT NULL THEN 1 ELSE 6 END"
    return (f"CASE WHEN {v} IS NULL THEN NULL WHEN {t} IN ('BIGINT', 'UBIGINT') THEN {integer} "
            f"WHEN {t} = 'DOUBLE' THEN CASE WHEN regexp_matches({v}, '[.eE]') THEN 2 ELSE {integer} END "
            f"WHEN {t} = 'BOOLEAN' THEN 3 "
            f"WHEN length({v}) < 10 OR try_cast(left({v}, 10) AS DATE) IS NULL THEN 6 "
            f"WHEN length({v}) = 10 THEN CASE WHEN regexp_full_match({v}, {sql_literal(_DATE)}) THEN 4 ELSE 6 END "
            f"WHEN regexp_full_match({v}, {sql_literal(_TS)}) THEN 5 ELSE 6 END")


def json_typed(v: str, t: str, typ: str) -> str:
    """SQL: a JSON value as the column type (``normalize.coerce``): text renderings of numbers and
    booleans as Python's ``str``/``json.dumps`` give them."""
    number = f"CAST(CAST({v} AS DOUBLE) AS VARCHAR)"
    if typ == "STRING":
        return f"CASE WHEN {t} = 'DOUBLE' AND regexp_matches({v}, '[.eE]') THEN {number} ELSE {v} END"
    if typ == "JSON":
        return (f"CASE WHEN {t} = 'VARCHAR' THEN {json_str(v)} "
                f"WHEN {t} = 'DOUBLE' AND regexp_matches({v}, '[.eE]') THEN {number} ELSE {v} END")
    return typed(v, typ)



def concat(pieces: list[tuple[bool, str]]) -> str:
    """SQL: the pieces (literal text, or SQL when the flag is False) concatenated, adjacent literals as one."""
    out: list[str] = []
    text: str | None = None
    for literal, piece in pieces:
        if literal:
            text = (text or "") + piece
            continue
        if text is not None:
            out.append(sql_literal(text))
            text = None
        out.append(piece)
    if text is not None:
        out.append(sql_literal(text))
    return " || ".join(out)

