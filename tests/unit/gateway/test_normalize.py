from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

import pytest

from chalicelib.gateway.ingest import normalize
from chalicelib.gateway.ingest.sources.documents import split_passages


@pytest.mark.parametrize("value, untyped, expected", [
    ("12", True, "INTEGER"), ("012", True, "STRING"), ("-3.5", True, "FLOAT"), ("1e3", True, "FLOAT"),
    ("TRUE", True, "BOOLEAN"), ("12", False, "STRING"), ("2024-02-30", True, "STRING"),
    ("2024-02-03", False, "DATE"), ("2024-02-03T04:05:06Z", False, "TIMESTAMP"),
    ("2024-02-03 04:05", True, "TIMESTAMP"), (True, False, "BOOLEAN"), (7, False, "INTEGER"),
    (2**70, False, "STRING"), (1.5, False, "FLOAT"), (float("nan"), False, "STRING"), (Decimal("3"), False, "INTEGER"),
    (Decimal("3.25"), False, "FLOAT"), ({"a": 1}, False, "JSON"), ([1], False, "JSON"), (None, True, None),
    (datetime(2024, 1, 1), False, "TIMESTAMP"), (date(2024, 1, 1), False, "DATE"), ("hello", True, "STRING"),
])
def test_infer(value, untyped, expected) -> None:
    assert normalize.infer(value, untyped) == expected


def test_widen_never_narrows() -> None:
    assert normalize.widen("INTEGER", "FLOAT") == "FLOAT"
    assert normalize.widen("DATE", "TIMESTAMP") == "TIMESTAMP"
    assert normalize.widen("INTEGER", "BOOLEAN") == "STRING"
    assert normalize.widen("JSON", "INTEGER") == "STRING"
    assert normalize.widen(None, "DATE") == "DATE"
    assert normalize.widen("DATE", None) == "DATE"


@pytest.mark.parametrize("name, samples, expected", [
    ("email", [], "PII"), ("Customer Email", [], "PII"), ("phone_number", [], "PII"), ("ssn", [], "PII"),
    ("full_name", [], "PII"), ("name", [], "PII"), ("file_name", ["a.txt"], "INTERNAL"), ("iban", [], "PII"),
    ("contact", ["a@example.com", "b@example.org"], "PII"), ("ref", ["4111 1111 1111 1111"], "PII"),
    ("ref", ["4111 1111 1111 1112"], "INTERNAL"), ("acct", ["DE89 3704 0044 0532 0130 00"], "PII"),
    ("tax", ["123-45-6789"], "PII"), ("api_key", [], "CONFIDENTIAL"), ("city", ["Berlin"], "INTERNAL"),
    ("count", ["12345678"], "INTERNAL"), ("line", ["+1 415 555 2671"], "PII"),
])
def test_classify(name, samples, expected) -> None:
    assert normalize.classify(name, samples) == expected


def test_column_names_are_sql_friendly_and_never_internal() -> None:
    assert normalize.column_name("First Name") == "first_name"
    assert normalize.column_name("customerID") == "customer_id"
    assert normalize.column_name("_secret") == "secret"
    assert normalize.column_name("2nd") == "c_2nd"
    assert normalize.column_name("!!!") == "column"


def test_plan_records_drift_and_keeps_admin_policies() -> None:
    schema, drift, names = normalize.plan([], [({"Id": "1", "E-mail": "a@b.co"}, True)], "t0", 0)
    assert [(f["name"], f["type"], f["policy"]) for f in schema] == [("id", "INTEGER", "ALLOW"), ("e_mail", "STRING", "MASK")]
    assert drift is None
    assert names == {"Id": "id", "E-mail": "e_mail"}
    schema[1]["policy"] = "HASH"  # an admin's choice survives later syncs
    schema2, drift, _ = normalize.plan(schema, [({"Id": "x", "New": 1}, True)], "t1", 1)
    assert drift == {"version": 2, "at": "t1", "added": [{"name": "new", "type": "INTEGER", "classification": "INTERNAL"}],
                     "changed": [{"name": "id", "from": "INTEGER", "to": "STRING"}]}
    assert {f["name"]: f["policy"] for f in schema2}["e_mail"] == "HASH"
    assert {f["name"]: f["nullable"] for f in schema2} == {"id": False, "e_mail": True, "new": True}


def test_coerce_matches_types() -> None:
    assert normalize.coerce("2024-01-02T03:04:05+02:00", "TIMESTAMP") == "2024-01-02 01:04:05.000000"
    assert normalize.coerce(date(2024, 1, 2), "TIMESTAMP") == "2024-01-02 00:00:00.000000"
    assert normalize.coerce(10, "STRING") == "10"
    assert normalize.coerce(True, "STRING") == "true"
    assert normalize.coerce({"b": 1, "a": 2}, "JSON") == '{"a": 2, "b": 1}'
    assert normalize.coerce("7", "FLOAT") == 7.0
    assert normalize.coerce("false", "BOOLEAN") is False


def test_split_passages_covers_the_text_within_limits() -> None:
    text = "Intro line.\n\n" + ("alpha beta gamma " * 40).strip() + "\n\nShort end."
    passages = split_passages(text, max_chars=120, overlap=20)
    assert all(len(p) <= 120 for _, _, p in passages)
    assert passages[0][2].startswith("Intro line.")
    assert passages[-1][2].endswith("Short end.")
    assert all(text[s:e].strip() == p for s, e, p in passages)
    covered = set()
    for s, e, _ in passages:
        covered.update(range(s, e))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())
    assert split_passages("") == []
