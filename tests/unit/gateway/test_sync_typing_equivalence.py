"""The sniffer-typed, single-pass typing path gives what the old three-table path gave (kept as the oracle in
``tests/reference/typed_rows_v1.py``) on randomized CSV objects: the same schema (types, nullability,
classification), drift, rows read, errors, and the same rows with the same keys, sources and hashes, both
straight from the relation the snapshot writer copies and once materialized."""
from __future__ import annotations

import os
import tempfile

import duckdb
import pytest

from chalicelib.gateway.ingest import native_objects as native
from chalicelib.gateway.ingest import normalize
from chalicelib.gateway.ingest import type_rules_sql as rules
from chalicelib.gateway.ingest import typed_rows as ingest
from chalicelib.gateway.ingest.sources import Batch, CsvFile, SourceError, s3_objects
from tests.reference import random_csv
from tests.reference import typed_rows_v1 as oracle

AT = "2026-01-01T00:00:00Z"


def _rows(relation: str) -> str:
    """SQL: a typing path's rows by key, hashes as integers (the old path stored their decimal text)."""
    return f"SELECT * EXCLUDE (_ord) REPLACE (CAST(_hash AS UBIGINT) AS _hash) FROM {relation} ORDER BY _key"


def _batch(tmp: str, t: random_csv.Table) -> Batch:
    files = []
    for order, (key, text) in enumerate(sorted(t.objects.items())):
        path = os.path.join(tmp, f"{order:05d}.csv")
        with open(path, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)

        def fallback(key: str = key, path: str = path) -> list:
            with open(path, "rb") as fh:
                rows, untyped = s3_objects.parse(fh.read(), "csv", key, ",")
            return s3_objects._records(key, rows, untyped, t.primary_key)

        files.append(CsvFile(key, path, ",", order, t.primary_key, fallback, "csv"))
    return Batch(records=[], cursor={}, rows_read=0, complete=True, primary_key=t.primary_key, files=files,
                 source_order={f.source: f.order for f in files})


def _run(module, t: random_csv.Table, old_schema: list, direct: bool = False):
    """(schema, drift, rows_read, column types, rows ordered by key) of one typing path, or its error."""
    with tempfile.TemporaryDirectory() as tmp:
        stage = module.open_stage()
        try:
            incoming = module.Incoming(stage, _batch(tmp, t))
            observer = normalize.Observer(old_schema)
            incoming.observe(observer)
            schema, drift, names = observer.finish(AT, 1)
            try:
                incoming.build(schema, names)
                if module is ingest:
                    if direct:
                        sql = _rows(f"({stage.incoming_sql})")
                        types = stage.con.execute(f"DESCRIBE {sql}").fetchall()
                        return schema, drift, stage.rows_read, [r[:2] for r in types], stage.con.execute(sql).fetchall()
                    stage.materialize()
            except SourceError as err:
                return ("error", str(err))
            if module is ingest:
                assert ("_hash", "UBIGINT") in [r[:2] for r in stage.con.execute("DESCRIBE incoming").fetchall()]
            sql = _rows("incoming")
            types = [r[:2] for r in stage.con.execute(f"DESCRIBE {sql}").fetchall()]
            return schema, drift, stage.rows_read, types, stage.con.execute(sql).fetchall()
        finally:
            stage.close()


def _run_sampled(t: random_csv.Table, old_schema: list):
    """As ``_run`` for a whole source the way the sync worker types it: from the samples where they decide,
    checked as the rows are read, nulls and rows read settled from the rows; with the objects it typed from
    their samples. None when a value past a sample refuted it (the worker then types the source again
    exactly)."""
    with tempfile.TemporaryDirectory() as tmp:
        stage = ingest.open_stage()
        try:
            incoming = ingest.Incoming(stage, _batch(tmp, t))
            observer = normalize.Observer(old_schema)
            incoming.observe(observer, sampled=True)
            schema, drift, names = observer.finish(AT, 1)
            try:
                incoming.build(schema, names)
                rows = f"({stage.incoming_sql})"
                by_source = dict(stage.con.execute(f"SELECT _source, count(*) FROM {rows} GROUP BY ALL").fetchall())
                has_null = stage.con.execute("SELECT " + ", ".join(
                    [f'bool_or("{f["name"]}" IS NULL)' for f in schema]) + f" FROM {rows}").fetchone() if schema else ()
                stage.materialize()
            except SourceError as err:
                return ("error", str(err)), incoming.sampled
            except duckdb.Error:
                assert incoming.sampled
                return None
            schema = incoming.settle(schema, by_source, {f["name"] for f, n in zip(schema, has_null, strict=True) if n})
            sql = _rows("incoming")
            types = [r[:2] for r in stage.con.execute(f"DESCRIBE {sql}").fetchall()]
            return (schema, drift, stage.rows_read, types, stage.con.execute(sql).fetchall()), incoming.sampled
        finally:
            stage.close()


def _same(t: random_csv.Table, old_schema: list | None = None) -> None:
    want = _run(oracle, t, old_schema or [])
    got = _run(ingest, t, old_schema or [])
    assert got == want
    if want[0] != "error" and not t.primary_key:  # keys never repeat: the relation itself is the rows
        assert _run(ingest, t, old_schema or [], direct=True) == want


@pytest.mark.parametrize("seed", range(30))
def test_random_objects_type_key_and_hash_as_the_old_path(seed: int) -> None:
    _same(random_csv.table(seed, blank_key=seed % 10 == 9))


@pytest.mark.parametrize("seed", range(4))
def test_a_value_past_the_sniffers_sample_changes_types_as_the_old_path(seed: int) -> None:
    t = random_csv.table(1000 + seed, long_rows=native.SNIFF_ROWS + 500)
    _same(t)


@pytest.mark.parametrize("seed", range(10))
def test_a_changed_source_drifts_the_schema_as_the_old_path(seed: int) -> None:
    before = random_csv.table(2000 + seed)
    first = _run(oracle, before, [])
    after = random_csv.changed(seed, before)
    _same(after, first[0] if first[0] != "error" else [])


def _or_error(fn, *args):
    try:
        return fn(*args)
    except SourceError as err:  # a row-by-row reader's error while the objects are observed
        return ("error", str(err))


def test_objects_typed_from_their_samples_match_the_old_path(monkeypatch) -> None:
    """With 30-row samples, random sources typed from their samples give the old path's result."""
    monkeypatch.setattr(native, "SNIFF_ROWS", 30)
    sampled_sources = 0
    for seed in range(40):
        t = random_csv.table(4000 + seed, long_rows=60 if seed % 2 else 0, blank_key=seed % 5 == 4)
        want = _or_error(_run, oracle, t, [])
        got = _or_error(_run_sampled, t, [])
        if got is None:
            got = _or_error(_run, ingest, t, [])
        elif got[0] != "error":
            got, sampled = got
            sampled_sources += bool(sampled)
        assert got == want, seed
    assert sampled_sources >= 5


def _source(late: list[str]) -> random_csv.Table:
    """3,000 rows of a key, an integer, a float, a date and a timestamp, ``late`` replacing row 2,900's (past
    the sniffer's sample, which DuckDB takes in 2,048-row chunks)."""
    rows = [[str(i), str(i * 7), f"{i / 3:.3f}", f"2024-01-{i % 28 + 1:02d}", f"2024-02-01T10:{i % 60:02d}:00Z"]
            for i in range(3000)]
    rows[2899] = late
    text = "id,n,x,d,ts\n" + "".join(",".join(r) + "\n" for r in rows)
    return random_csv.Table({"t/00.csv": text}, ["id"], [])


@pytest.mark.parametrize("late", [
    ["2899", "007", "1.5", "2024-01-01", "2024-02-01T10:00:00Z"],  # DuckDB reads 007 as 7; the rules: text
    ["2899", "-0", "1.5", "2024-01-01", "2024-02-01T10:00:00Z"],  # an integer to the rules, not its own text
    ["2899", "1000000000000000000", "1.5", "2024-01-01", "2024-02-01T10:00:00Z"],  # 19 digits: a float
    ["2899", "7", "1,5", "2024-01-01", "2024-02-01T10:00:00Z"],  # an unquoted comma: a ragged row
    ["2899", "7", "1.5", "2024-02-30", "2024-02-01T10:00:00Z"],  # no such day: text
    ["2899", "7", "1.5", "2024-01-01", "2024-02-01T24:00:00Z"],
    ["2899", "7", "1.5", "2024-01-01", "2024-02-01"],  # a date in a timestamp column: still a timestamp
    ["", "7", "1.5", "2024-01-01", "2024-02-01T10:00:00Z"],  # no key: the sync fails, naming row 2,900
])
def test_a_value_past_the_sample_refutes_it_and_the_exact_path_decides(monkeypatch, late: list[str]) -> None:
    monkeypatch.setattr(native, "SNIFF_ROWS", 1000)
    t = _source(late)
    want = _or_error(_run, oracle, t, [])
    got = _or_error(_run_sampled, t, [])
    if late[4] == "2024-02-01":
        assert got[0] == want and got[1] == ["t/00.csv"]  # within the sampled types: not refuted
        return
    assert got is None  # refuted as the rows were read
    assert _or_error(_run, ingest, t, []) == want
    if not late[0]:
        assert want == ("error", "t/00.csv row 2900 has no value for primary key id")


def test_the_writers_integer_check_accepts_only_what_the_typing_rules_call_an_integer() -> None:
    """The check a sampled INTEGER column's values pass as they are written (no regular expression) accepts
    a subset of ``normalize``'s integers: every canonical one, never another value (a refused one only sends
    the sync down the exact path)."""
    import random

    rng = random.Random(7)
    values = {"0", "-0", "00", "+1", " 1", "1 ", "1_000", "1e3", "0x10", "1,000", "\u0663", "-", "--1",
              "9" * 18, "-" + "9" * 18, "1" + "0" * 18, "9223372036854775807", "-9223372036854775808"}
    for _ in range(3000):
        values.add(rng.choice(["", "-", "+", " "]) + "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 20)))
                   + rng.choice(["", "", ".0", " ", "x"]))
    con = duckdb.connect()
    try:
        got = dict(con.execute(f"SELECT v, coalesce({rules.accepts('v', 'INTEGER')}, false) FROM "
                               "unnest($1) t(v)", [sorted(values)]).fetchall())
    finally:
        con.close()
    for v, accepted in got.items():
        rule = bool(normalize.INT_RE.fullmatch(v))
        assert accepted <= rule, v
        assert accepted == (rule and v != "-0"), v


@pytest.mark.parametrize("prior", ["INTEGER", "FLOAT", "BOOLEAN", "DATE", "TIMESTAMP", "STRING"])
def test_the_datasets_types_propose_and_the_values_decide_as_the_old_path(monkeypatch, prior: str) -> None:
    """A dataset's types propose each column's type in place of the sniffer (``_proposals``). Every column of
    the source below once held ``prior``: a proposal its values refute (a float for an integer, a date-time
    for a date) gets the full rules, one they narrow (integers for a float) is narrowed, and the result is
    the old path's, exact and from samples alike."""
    monkeypatch.setattr(native, "SNIFF_ROWS", 1000)
    t = _source(["2899", "7", "1.5", "2024-01-01", "2024-02-01T10:00:00Z"])
    first = _run(oracle, t, [])[0]
    old_schema = [f if f["name"] == "id" else {**f, "type": prior} for f in first]
    sniffed: list[str] = []
    real_sniff = native._sniff
    monkeypatch.setattr(native, "_sniff", lambda stage, f, width: sniffed.append(f.source) or real_sniff(stage, f, width))
    want = _run(oracle, t, old_schema)
    assert _run(ingest, t, old_schema) == want
    got = _run_sampled(t, old_schema)
    assert got is None or got[0] == want
    assert sniffed == []  # every column had a type to propose


def test_a_new_column_is_proposed_by_the_sniffer_beside_the_datasets_types(monkeypatch) -> None:
    t = _source(["2899", "7", "1.5", "2024-01-01", "2024-02-01T10:00:00Z"])
    old_schema = [f for f in _run(oracle, t, [])[0] if f["name"] != "ts"]  # ``ts`` arrives new
    sniffed: list[str] = []
    real_sniff = native._sniff
    monkeypatch.setattr(native, "_sniff", lambda stage, f, width: sniffed.append(f.source) or real_sniff(stage, f, width))
    assert _run(ingest, t, old_schema) == _run(oracle, t, old_schema)
    assert sniffed == ["t/00.csv"]


def test_sources_typed_from_the_datasets_types_and_their_samples_match_the_old_path(monkeypatch) -> None:
    """Random changed sources after a first sync, with 30-row samples: the dataset's types propose."""
    monkeypatch.setattr(native, "SNIFF_ROWS", 30)
    for seed in range(20):
        before = random_csv.table(5000 + seed, long_rows=60 if seed % 2 else 0)
        first = _or_error(_run, oracle, before, [])
        old_schema = first[0] if first[0] != "error" else []
        t = random_csv.changed(seed, before)
        want = _or_error(_run, oracle, t, old_schema)
        got = _or_error(_run_sampled, t, old_schema)
        if got is None:
            got = _or_error(_run, ingest, t, old_schema)
        elif got[0] != "error":
            got = got[0]
        assert got == want, seed
        assert _or_error(_run, ingest, t, old_schema) == want, seed
