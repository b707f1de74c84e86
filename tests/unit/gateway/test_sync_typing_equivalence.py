"""The sniffer-typed, single-pass typing path gives what the old three-table path gave (kept as the oracle in
``tests/reference/typed_rows_v1.py``) on randomized CSV objects: the same schema (types, nullability,
classification), drift, rows read, errors, and the same rows with the same keys, sources and hashes, both
straight from the relation the snapshot writer copies and once materialized."""
from __future__ import annotations

import os
import tempfile

import pytest

from chalicelib.gateway.ingest import normalize
from chalicelib.gateway.ingest import typed_rows as ingest
from chalicelib.gateway.ingest.sources import Batch, CsvFile, SourceError, s3_objects
from tests.reference import random_csv
from tests.reference import typed_rows_v1 as oracle

AT = "2026-01-01T00:00:00Z"


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
                        sql = f"SELECT * EXCLUDE (_ord) FROM ({stage.incoming_sql}) ORDER BY _key"
                        types = stage.con.execute(f"DESCRIBE {sql}").fetchall()
                        return schema, drift, stage.rows_read, [r[:2] for r in types], stage.con.execute(sql).fetchall()
                    stage.materialize()
            except SourceError as err:
                return ("error", str(err))
            sql = "SELECT * EXCLUDE (_ord) FROM incoming ORDER BY _key"
            types = [r[:2] for r in stage.con.execute(f"DESCRIBE {sql}").fetchall()]
            return schema, drift, stage.rows_read, types, stage.con.execute(sql).fetchall()
        finally:
            stage.close()


def _same(t: random_csv.Table, old_schema: list | None = None) -> None:
    want = _run(oracle, t, old_schema or [])
    got = _run(ingest, t, old_schema or [])
    assert got == want
    if want[0] != "error" and not t.primary_key:  # keys never repeat: the relation itself is the rows
        assert _run(ingest, t, old_schema or [], direct=True) == want


@pytest.mark.parametrize("seed", range(60))
def test_random_objects_type_key_and_hash_as_the_old_path(seed: int) -> None:
    _same(random_csv.table(seed, blank_key=seed % 10 == 9))


@pytest.mark.parametrize("seed", range(4))
def test_a_value_past_the_sniffers_sample_changes_types_as_the_old_path(seed: int) -> None:
    t = random_csv.table(1000 + seed, long_rows=ingest.SNIFF_ROWS + 500)
    _same(t)


@pytest.mark.parametrize("seed", range(20))
def test_a_changed_source_drifts_the_schema_as_the_old_path(seed: int) -> None:
    before = random_csv.table(2000 + seed)
    first = _run(oracle, before, [])
    after = random_csv.changed(seed, before)
    _same(after, first[0] if first[0] != "error" else [])
