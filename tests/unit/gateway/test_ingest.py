"""The SQL type rules of native ingestion agree with ``normalize.infer`` / ``normalize.coerce``."""
from __future__ import annotations

import pytest

from chalicelib.gateway.ingest import normalize
from chalicelib.gateway.ingest import type_rules_sql as rules
from chalicelib.gateway.ingest import typed_rows as ingest

VALUES = [
    "0", "7", "-12", "007", "123456789012345678", "1234567890123456789", "1.5", "-0.25", ".5", "-.5", "1e5", "2E-3",
    "1.", "01.5", "+1", "1,5", "true", "FALSE", "True", "yes", "t", "2024-02-29", "2023-02-29", "2024-13-01",
    "2024-1-01", "2024-01-01T10:00", "2024-01-01 10:00:00", "2024-01-01T10:00:00Z", "2024-01-01T10:00:00z",
    "2024-01-01T10:00:00.123456+02:00", "2024-01-01 10:00+0200", "2024-01-01T24:00:00", "2024-01-01T10:60",
    "2024-02-30T10:00:00", "2024-01-01T10:00:00.1234567", "2024-01-01T10:00:00+25:00", "abc", "-", ".", "-abc",
    "é", "user@example.com", "  1", "1 ", "NaN", "inf", "2024-01-01 UTC", "12:00",
]


@pytest.fixture(scope="module")
def stage():
    st = ingest.open_stage()
    yield st
    st.close()


@pytest.mark.parametrize("value", VALUES)
def test_sql_category_is_the_python_type(stage, value: str) -> None:
    code = stage.con.execute(f"SELECT {rules.category('v')} FROM (SELECT ?::VARCHAR AS v)", [value]).fetchone()[0]
    assert rules.CODES[code] == normalize.infer(value, True), value


@pytest.mark.parametrize("value,typ", [
    ("12", "INTEGER"), ("-3", "FLOAT"), ("1e5", "FLOAT"), ("TRUE", "BOOLEAN"), ("false", "BOOLEAN"),
    ("2024-01-01", "DATE"), ("2024-01-01", "TIMESTAMP"), ("2024-01-01T10:00:00Z", "TIMESTAMP"),
    ("2024-01-01 10:00+0200", "TIMESTAMP"), ("2024-01-01T10:00:00.5-01:30", "TIMESTAMP"), ("x y", "STRING"),
])
def test_sql_cast_is_the_python_coercion(stage, value: str, typ: str) -> None:
    from chalicelib.gateway.vocabulary import DUCKDB_TYPES

    got = stage.con.execute(f"SELECT CAST({rules.typed('v', typ)} AS {DUCKDB_TYPES[typ]})::VARCHAR "
                            "FROM (SELECT ?::VARCHAR AS v)", [value]).fetchone()[0]
    want = stage.con.execute(f"SELECT CAST(?::VARCHAR AS {DUCKDB_TYPES[typ]})::VARCHAR",
                             [str(normalize.coerce(value, typ))]).fetchone()[0]
    assert got == want


@pytest.mark.parametrize("value", ["abc", 'say "hi"', "back\\slash", "tab\there", "é", "emoji 😀", "", "ctl\x01"])
def test_sql_key_text_is_json_dumps(stage, value: str) -> None:
    import json

    got = stage.con.execute(f"SELECT {rules.json_str('v')} FROM (SELECT ?::VARCHAR AS v)", [value]).fetchone()[0]
    assert got == json.dumps(value)


ALLOWED = {"INTEGER": {"INTEGER"}, "FLOAT": {"INTEGER", "FLOAT"}, "BOOLEAN": {"BOOLEAN"}, "DATE": {"DATE"},
           "TIMESTAMP": {"DATE", "TIMESTAMP"}}


@pytest.mark.parametrize("typ", sorted(ALLOWED))
def test_the_one_test_confirming_a_sniffed_type_is_the_python_rule(stage, typ: str) -> None:
    for value in VALUES:
        got = stage.con.execute(f"SELECT {rules.is_of('v', typ)} FROM (SELECT ?::VARCHAR AS v)", [value]).fetchone()[0]
        assert bool(got) == (normalize.infer(value, True) in ALLOWED[typ]), (typ, value)
