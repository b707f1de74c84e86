"""Whole syncs through the worker give the same snapshot as the old typing and snapshot path (kept as the
oracle under ``tests/reference/``) on randomized CSV sources: the same dataset schema, Parquet column types,
rows with their keys, sources and hashes, row counts, and the same incremental diff (rows read, written and
deleted) after the source changes, then after a full refresh."""
from __future__ import annotations

import json
import os
import tempfile
from types import SimpleNamespace

import duckdb
import pytest

from chalicelib.gateway import storage
from chalicelib.gateway.ingest import sync_worker
from tests.functional.conftest import Tenant
from tests.functional.gateway.sync_helpers import (
    READER_ROLE,
    call,
    client,
    dataset,
    drain,
    new_bucket,
    put,
    source_client,
)
from tests.reference import random_csv, snapshot_v1
from tests.reference import typed_rows_v1 as oracle_rows


class _OracleIncoming(oracle_rows.Incoming):
    """The old path types every object exactly: nothing is ever typed from a sample."""

    sampled: list[str] = []

    def observe(self, observer, sampled: bool = False) -> None:
        super().observe(observer)


_oracle = SimpleNamespace(open_stage=oracle_rows.open_stage, Incoming=_OracleIncoming)


def _oracle_write(region, workspace_id, dataset_id, sync_id, attempt, schema, stage, *, old_prefix, complete,
                  replaced_sources, compact=False):
    incoming = stage.con.execute("SELECT count(*) FROM incoming").fetchone()[0]
    snap = snapshot_v1.write_snapshot(region, workspace_id, dataset_id, sync_id, attempt, schema, stage,
                                      old_prefix=old_prefix, complete=complete, replaced_sources=replaced_sources,
                                      compact=compact)
    snap.incoming_rows = incoming
    snap.keys = storage.read_manifest(region, snap.prefix).keys()
    snap.old_keys = storage.read_manifest(region, old_prefix).keys() if old_prefix else []
    return snap


def _state(tenant: Tenant, ds_id: str) -> dict:
    ds = dataset(tenant, ds_id)
    schema = [{k: f[k] for k in ("name", "type", "nullable", "classification")} for f in json.loads(ds.schema)]
    with tempfile.TemporaryDirectory() as tmp:
        source = storage.snapshot_source(tenant.region, ds.data_prefix, os.path.join(tmp, "files"))
        con = duckdb.connect()
        try:
            types = sorted(r[:2] for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall())
        finally:
            con.close()
    names, rows = storage.read_rows(tenant.region, ds.data_prefix, internal=True)
    at = names.index("_hash")  # the old path stored the hashes' decimal text
    by_key = sorted(tuple(sorted(zip(names, map(repr, [*r[:at], int(r[at]), *r[at + 1:]]), strict=True)))
                    for r in rows)
    return {"schema": schema, "parquet_types": [t for t in types if t[0] != "_hash"], "hash_type": dict(types)["_hash"],
            "rows": by_key, "row_count": int(ds.row_count)}


def _sync(c, tenant: Tenant, conn: dict, mode: str) -> dict:
    st, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token, {"mode": mode})
    assert st == 202, run
    drain(tenant.region)
    run = call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)[1]
    return {k: run[k] for k in ("status", "rows_read", "rows_written", "rows_deleted", "error")}


@pytest.mark.parametrize("seed", range(6))
def test_random_sources_sync_to_the_same_snapshots_and_diffs_as_the_old_path(tenant: Tenant, monkeypatch,
                                                                              seed: int) -> None:
    """Odd seeds sniff 40-row samples, so a full refresh types most objects from their sample (checked as
    they are written, typed again exactly where a later value refutes it)."""
    from chalicelib.gateway.ingest import native_objects
    from chalicelib.knowledge import indexer

    monkeypatch.setattr(indexer, "on_sync", lambda *a, **k: None)
    if seed % 2:
        monkeypatch.setattr(native_objects, "SNIFF_ROWS", 40)
    before = random_csv.table(3000 + seed)
    after = random_csv.changed(seed, before)
    bucket = new_bucket(tenant.region)
    for key, text in before.objects.items():
        put(tenant.region, bucket, key, text)
    config = {"role_arn": READER_ROLE, "bucket": bucket, "prefix": "t/"}
    if before.primary_key:
        config["primary_key"] = before.primary_key
    with client() as c:
        conns = {}
        for name in ("new", "old"):
            st, conns[name] = call(c, "POST", "/v1/connectors", tenant.token,
                                   {"name": f"Equivalence {name} {seed}", "kind": "s3", "config": config})
            assert st == 201, conns[name]

        def both(mode: str) -> None:
            new_run = _sync(c, tenant, conns["new"], mode)
            with monkeypatch.context() as m:
                m.setattr(sync_worker, "ingest", _oracle)
                m.setattr(storage, "write_snapshot", _oracle_write)
                old_run = _sync(c, tenant, conns["old"], mode)
            assert new_run == old_run
            assert new_run["status"] == "SUCCEEDED", new_run
            new_state = _state(tenant, conns["new"]["dataset"]["id"])
            old_state = _state(tenant, conns["old"]["dataset"]["id"])
            assert (new_state.pop("hash_type"), old_state.pop("hash_type")) == ("UBIGINT", "VARCHAR")
            assert new_state == old_state

        both("FULL_REFRESH")
        s3 = source_client("s3", tenant.region)
        for key in set(before.objects) - set(after.objects):
            s3.delete_object(Bucket=bucket, Key=key)
        for key, text in after.objects.items():
            if before.objects.get(key) != text:
                put(tenant.region, bucket, key, text)
        both("INCREMENTAL")
        both("FULL_REFRESH")


def test_a_snapshot_with_text_hashes_takes_layers_and_compares_equal(tenant: Tenant, monkeypatch) -> None:
    """Snapshots written before row hashes were integers hold their decimal text: an incremental sync layers
    integer hashes on such a base and still finds the unchanged rows, the mixed snapshot reads whole, and a
    full refresh of the same rows writes none."""
    from chalicelib.knowledge import indexer

    monkeypatch.setattr(indexer, "on_sync", lambda *a, **k: None)
    bucket = new_bucket(tenant.region)

    def rows(ids: range, changed: set[int] = frozenset()) -> str:
        return "id,name,amount\n" + "".join(f"{i},n{i},{i * 10 + (1 if i in changed else 0)}\n" for i in ids)

    put(tenant.region, bucket, "t/a.csv", rows(range(1, 51)))
    put(tenant.region, bucket, "t/b.csv", rows(range(51, 61)))
    config = {"role_arn": READER_ROLE, "bucket": bucket, "prefix": "t/", "primary_key": ["id"]}
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", tenant.token, {"name": "Text hashes", "kind": "s3", "config": config})
        assert st == 201, conn
        ds_id = conn["dataset"]["id"]
        with monkeypatch.context() as m:  # the old writer: hashes as text
            m.setattr(sync_worker, "ingest", _oracle)
            m.setattr(storage, "write_snapshot", _oracle_write)
            assert _sync(c, tenant, conn, "FULL_REFRESH")["rows_written"] == 60
        assert _state(tenant, ds_id)["hash_type"] == "VARCHAR"

        put(tenant.region, bucket, "t/b.csv", rows(range(51, 60), changed={52, 55, 58}))  # 3 changed, 60 gone
        run = _sync(c, tenant, conn, "INCREMENTAL")
        assert (run["status"], run["rows_written"], run["rows_deleted"]) == ("SUCCEEDED", 3, 1)
        manifest = storage.read_manifest(tenant.region, dataset(tenant, ds_id).data_prefix)
        assert len(manifest.layers) == 1  # on the text-hashed base
        names, got = storage.read_rows(tenant.region, dataset(tenant, ds_id).data_prefix)
        assert sorted((dict(zip(names, r, strict=True)) for r in got), key=lambda r: r["id"]) == [
            {"id": i, "name": f"n{i}", "amount": i * 10 + (1 if i in (52, 55, 58) else 0)} for i in range(1, 60)]

        run = _sync(c, tenant, conn, "FULL_REFRESH")
        assert (run["status"], run["rows_written"], run["rows_deleted"]) == ("SUCCEEDED", 0, 0)
        assert _state(tenant, ds_id)["hash_type"] == "UBIGINT"
