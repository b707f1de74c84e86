"""Incremental syncs write a small layer (counted objects, not time) and readers see exactly the state a
full sync of the same data gives."""
from __future__ import annotations

import sys

from chalicelib.core import aws
from chalicelib.gateway import storage
from chalicelib.gateway.snapshots import base, layers, reading, transfer
from tests.functional.conftest import Tenant
from tests.functional.gateway.sync_helpers import READER_ROLE, call, client, dataset, drain, new_bucket, put

OBJECTS, PER_OBJECT = 20, 500  # 10,000 rows


def _csv(obj: int, *, changed: bool = False) -> str:
    lines = ["id,email,amount,joined"]
    for i in range(obj * PER_OBJECT, (obj + 1) * PER_OBJECT):
        n = i - obj * PER_OBJECT
        if changed and 50 <= n < 75:
            continue  # 25 rows deleted
        amount = i % 97 + (1000 if changed and n < 50 else 0)  # 50 rows changed
        lines.append(f"{i},user{i}@example.com,{amount},2024-01-{i % 28 + 1:02d}")
    if changed:
        lines += [f"{100_000 + obj * 100 + k},new{k}@example.com,{k},2024-02-01" for k in range(25)]  # 25 rows added
    return "\n".join(lines) + "\n"


def _connector(c, tenant: Tenant, bucket: str, name: str) -> dict:
    st, conn = call(c, "POST", "/v1/connectors", tenant.token, {"name": name, "kind": "s3", "config": {
        "role_arn": READER_ROLE, "bucket": bucket, "prefix": "rows/", "primary_key": ["id"]}})
    assert st == 201, conn
    return conn


def _sync(c, tenant: Tenant, conn: dict, mode: str) -> dict:
    st, run = call(c, "POST", f"/v1/connectors/{conn['id']}/sync", tenant.token, {"mode": mode})
    assert st == 202, run
    drain(tenant.region)
    return call(c, "GET", f"/v1/connectors/{conn['id']}/syncs/{run['id']}", tenant.token)[1]


def _first_sync(c, tenant: Tenant, objects: int, name: str) -> tuple[str, dict, str]:
    """A bucket of ``objects`` CSV objects, its connector and a FULL_REFRESH: (bucket, connector, dataset id)."""
    bucket = new_bucket(tenant.region)
    for o in range(objects):
        put(tenant.region, bucket, f"rows/{o:02d}.csv", _csv(o))
    conn = _connector(c, tenant, bucket, name)
    assert _sync(c, tenant, conn, "FULL_REFRESH")["status"] == "SUCCEEDED"
    return bucket, conn, conn["dataset"]["id"]


def _objects(tenant: Tenant, dataset_id: str) -> set[str]:
    s3 = aws.client("s3", tenant.region)
    root = storage.dataset_root(tenant.workspace_id, dataset_id)
    return {o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=aws.bucket_name("data", tenant.region), Prefix=root) for o in page.get("Contents", [])}


def test_one_percent_changed_writes_a_small_layer_and_reads_like_a_full_sync(tenant: Tenant) -> None:
    bucket = new_bucket(tenant.region)
    for o in range(OBJECTS):
        put(tenant.region, bucket, f"rows/{o:02d}.csv", _csv(o))
    with client() as c:
        layered = _connector(c, tenant, bucket, "Layered rows")
        run = _sync(c, tenant, layered, "FULL_REFRESH")
        assert run["status"] == "SUCCEEDED", run
        assert run["rows_written"] == OBJECTS * PER_OBJECT, run
        ds_id = layered["dataset"]["id"]
        before = dataset(tenant, ds_id)
        objects_before = _objects(tenant, ds_id)

        put(tenant.region, bucket, "rows/07.csv", _csv(7, changed=True))  # 1% of the rows touched
        run = _sync(c, tenant, layered, "INCREMENTAL")
        assert run["status"] == "SUCCEEDED", run
        assert (run["rows_read"], run["rows_written"], run["rows_deleted"]) == (PER_OBJECT, 75, 25), run
        after = dataset(tenant, ds_id)
        assert after.data_prefix != before.data_prefix  # a content change is a new snapshot version
        assert after.row_count == OBJECTS * PER_OBJECT
        new = _objects(tenant, ds_id) - objects_before
        # the layer's upserts (75 rows) and deletes (25 keys) and the manifest: no base part rewritten
        assert len(new) == 3, new
        assert all(k.startswith(after.data_prefix + "/") for k in new), new
        assert not any("/part-" in k for k in new)
        manifest = storage.read_manifest(tenant.region, after.data_prefix)
        assert manifest.base == storage.read_manifest(tenant.region, before.data_prefix).base
        assert [layer["rows"] for layer in manifest.layers] == [100]

        # the same source synced in full into another dataset: identical rows and query answers
        fresh = _connector(c, tenant, bucket, "Fresh rows")
        assert _sync(c, tenant, fresh, "FULL_REFRESH")["status"] == "SUCCEEDED"
        want = storage.read_rows(tenant.region, dataset(tenant, fresh["dataset"]["id"]).data_prefix)
        got = storage.read_rows(tenant.region, after.data_prefix)
        assert got == want
        assert len(got[1]) == OBJECTS * PER_OBJECT
        a, b = layered["dataset"]["name"], fresh["dataset"]["name"]
        sql = (f"SELECT (SELECT count(*) FROM (SELECT * FROM {a} EXCEPT ALL SELECT * FROM {b})) + "
               f"(SELECT count(*) FROM (SELECT * FROM {b} EXCEPT ALL SELECT * FROM {a})) AS differ, "
               f"(SELECT count(*) FROM {a}) AS n, (SELECT max(amount) FROM {a}) AS top, "
               f"(SELECT count(*) FROM {a} WHERE id BETWEEN 3550 AND 3574) AS gone")
        st, page = call(c, "POST", "/v1/query", tenant.token, {"sql": sql})
        assert st == 200, page
        top = 1000 + max(i % 97 for i in range(7 * PER_OBJECT, 7 * PER_OBJECT + 50))  # a changed row's amount
        assert page["rows"] == [[0, OBJECTS * PER_OBJECT, top, 0]], page


def test_layers_stack_then_compact_and_deleted_objects_drop_their_rows(tenant: Tenant, monkeypatch) -> None:
    monkeypatch.setattr(layers, "MAX_LAYERS", 2)
    with client() as c:
        bucket, conn, ds_id = _first_sync(c, tenant, 4, "Stacked rows")
        put(tenant.region, bucket, "rows/01.csv", _csv(1, changed=True))
        assert _sync(c, tenant, conn, "INCREMENTAL")["status"] == "SUCCEEDED"
        from tests.functional.gateway.sync_helpers import source_client

        source_client("s3", tenant.region).delete_object(Bucket=bucket, Key="rows/02.csv")
        first = storage.read_manifest(tenant.region, dataset(tenant, ds_id).data_prefix).replaced["prefix"]
        leftover = f"{storage.dataset_root(tenant.workspace_id, ds_id)}sync_crashed-a1/part-00000.parquet"
        data = aws.client("s3", tenant.region)
        data.put_object(Bucket=aws.bucket_name(storage.BUCKET, tenant.region), Key=leftover, Body=b"x")
        run = _sync(c, tenant, conn, "INCREMENTAL")
        assert run["rows_deleted"] == PER_OBJECT, run
        ds = dataset(tenant, ds_id)
        assert len(storage.read_manifest(tenant.region, ds.data_prefix).layers) == 2
        # the second layer retired the first snapshot, whose parts are still the base: its lone manifest, like
        # the leftover of a crashed attempt, waits for a sync that lists (a new base, or a retried attempt)
        assert f"{first}/{storage.MANIFEST}" in _objects(tenant, ds_id)
        assert leftover in _objects(tenant, ds_id)
        ids = {r[0] for r in storage.read_rows(tenant.region, ds.data_prefix)[1]}
        assert ds.row_count == len(ids) == 3 * PER_OBJECT
        assert not ids & set(range(2 * PER_OBJECT, 3 * PER_OBJECT))
        assert 100_100 in ids
        assert 550 not in ids
        # a third layer would pass MAX_LAYERS: everything is compacted into a new base, same rows
        put(tenant.region, bucket, "rows/03.csv", _csv(3, changed=True))
        assert _sync(c, tenant, conn, "INCREMENTAL")["status"] == "SUCCEEDED"
        ds = dataset(tenant, ds_id)
        manifest = storage.read_manifest(tenant.region, ds.data_prefix)
        assert manifest.layers == []
        assert all(k.startswith(ds.data_prefix + "/") for k in manifest.base)
        ids = {r[0] for r in storage.read_rows(tenant.region, ds.data_prefix)[1]}
        assert ds.row_count == len(ids) == 3 * PER_OBJECT
        assert 1550 not in ids
        # files no current or previous snapshot references are gone
        keep = set(manifest.keys()) | {f"{ds.data_prefix}/{storage.MANIFEST}"}
        stray = [k for k in _objects(tenant, ds_id) if k not in keep and not k.endswith(storage.MANIFEST)]
        previous = [k for k in stray if "/part-" not in k and "/layer-" not in k]
        assert not previous
        assert leftover not in _objects(tenant, ds_id)  # the new base listed the dataset's objects
        assert f"{first}/{storage.MANIFEST}" not in _objects(tenant, ds_id)
        # the next layer retires the snapshot before the new base, whose parts and layers nothing references
        # any more: they go by name at once
        before_base = storage.read_manifest(tenant.region, manifest.replaced["prefix"])
        put(tenant.region, bucket, "rows/03.csv", _csv(3))
        assert _sync(c, tenant, conn, "INCREMENTAL")["status"] == "SUCCEEDED"
        assert len(storage.read_manifest(tenant.region, dataset(tenant, ds_id).data_prefix).layers) == 1
        assert not set(before_base.keys()) & _objects(tenant, ds_id)


def test_syncs_that_stack_no_layer_leave_no_manifest_behind(tenant: Tenant) -> None:
    """An object written again with the same rows is a sync with a new snapshot but no new layer: nothing
    bounds how many of those come before a new base lists the dataset, so each deletes the manifest it
    retires at once."""
    with client() as c:
        bucket, conn, ds_id = _first_sync(c, tenant, 2, "Rewritten rows")
        header, *rows = _csv(1).splitlines()
        for n in range(4):  # the same rows in another order: a changed object
            put(tenant.region, bucket, "rows/01.csv", "\n".join([header, *rows[n + 1:], *rows[:n + 1]]) + "\n")
            run = _sync(c, tenant, conn, "INCREMENTAL")
            assert (run["status"], run["rows_written"], run["rows_deleted"]) == ("SUCCEEDED", 0, 0), run
        manifests = [k for k in _objects(tenant, ds_id) if k.endswith(storage.MANIFEST)]
        assert len(manifests) == 2  # the current snapshot's and the previous one's (for in-flight readers)
        assert storage.read_manifest(tenant.region, dataset(tenant, ds_id).data_prefix).layers == []


def test_a_key_moving_to_another_object_is_counted_once_and_stays_when_its_old_object_goes(tenant: Tenant,
                                                                                          monkeypatch) -> None:
    """Digests of the objects whose key range holds an incoming key are read too: a key that moves from
    object 00 to object 01 is an update, not an addition, and deleting object 00 later keeps it."""
    monkeypatch.setattr(base, "PART_ROWS", 2048)  # parts are cut at 2,048-row chunks: one object per part,
    monkeypatch.setattr(sys.modules[__name__], "PER_OBJECT", 2048)  # so the part digests decide which are read
    monkeypatch.setattr(layers, "COMPACT_MIN_ROWS", 10_000)  # an object's change stays a layer
    bucket = new_bucket(tenant.region)
    for o in range(3):
        put(tenant.region, bucket, f"rows/{o:02d}.csv", _csv(o))
    with client() as c:
        conn = _connector(c, tenant, bucket, "Moving rows")
        assert _sync(c, tenant, conn, "FULL_REFRESH")["status"] == "SUCCEEDED"
        ds_id = conn["dataset"]["id"]
        moved = _csv(1) + "7,moved@example.com,1,2024-03-01\n"  # id 7 was object 00's
        put(tenant.region, bucket, "rows/01.csv", moved)
        run = _sync(c, tenant, conn, "INCREMENTAL")
        assert (run["rows_written"], run["rows_deleted"]) == (1, 0), run
        ds = dataset(tenant, ds_id)
        assert ds.row_count == 3 * PER_OBJECT
        assert len(storage.read_manifest(tenant.region, ds.data_prefix).layers) == 1
        from tests.functional.gateway.sync_helpers import source_client

        source_client("s3", tenant.region).delete_object(Bucket=bucket, Key="rows/00.csv")
        run = _sync(c, tenant, conn, "INCREMENTAL")
        assert run["rows_deleted"] == PER_OBJECT - 1, run
        ds = dataset(tenant, ds_id)
        names, rows = storage.read_rows(tenant.region, ds.data_prefix)
        by_id = {r[0]: dict(zip(names, r, strict=True)) for r in rows}
        assert ds.row_count == len(by_id) == 2 * PER_OBJECT + 1
        assert by_id[7]["email"] == "moved@example.com"
        assert 8 not in by_id


def _recording_downloads(monkeypatch) -> list[str]:
    """The keys the snapshot writer downloads (not the readers after the sync), in order."""
    downloaded: list[str] = []
    real_download, real_write, writing = transfer.download, storage.write_snapshot, []

    def download(region, keys, into, **kw):
        if writing:
            downloaded.extend(keys)
        return real_download(region, keys, into, **kw)

    def write(*args, **kwargs):
        writing.append(1)
        try:
            return real_write(*args, **kwargs)
        finally:
            writing.pop()

    monkeypatch.setattr(transfer, "download", download)
    monkeypatch.setattr(storage, "write_snapshot", write)
    return downloaded


def test_an_incremental_sync_reads_only_the_base_parts_its_change_touches(tenant: Tenant, monkeypatch) -> None:
    """Change detection reads the part digests in the manifest, then only the base parts holding the
    changed object's rows or its keys (here one of five), never the whole snapshot."""
    monkeypatch.setattr(base, "PART_ROWS", 2048)  # one part per two objects (parts are cut at 2,048-row chunks)
    downloaded = _recording_downloads(monkeypatch)

    def rows(obj: int, version: int) -> str:
        return "code,amount\n" + "".join(f"u{i:06d},{i + version}\n" for i in range(obj * 1024, (obj + 1) * 1024))

    bucket = new_bucket(tenant.region)
    for o in range(10):
        put(tenant.region, bucket, f"rows/{o:02d}.csv", rows(o, 0))
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", tenant.token, {"name": "Coded rows", "kind": "s3", "config": {
            "role_arn": READER_ROLE, "bucket": bucket, "prefix": "rows/", "primary_key": ["code"]}})
        assert st == 201, conn
        assert _sync(c, tenant, conn, "FULL_REFRESH")["status"] == "SUCCEEDED"
        ds_id = conn["dataset"]["id"]
        before = storage.read_manifest(tenant.region, dataset(tenant, ds_id).data_prefix)
        assert len(before.base) == len(before.parts) == 5
        objects_before = _objects(tenant, ds_id)
        put(tenant.region, bucket, "rows/07.csv", rows(7, 1))
        downloaded.clear()
        run = _sync(c, tenant, conn, "INCREMENTAL")
        assert (run["rows_read"], run["rows_written"], run["rows_deleted"]) == (1024, 1024, 0), run
        assert downloaded == [before.base[3]]  # objects 06 and 07, sorted by source: the fourth part
        after = dataset(tenant, ds_id)
        assert len(_objects(tenant, ds_id) - objects_before) == 2  # the layer's upserts and the manifest
        names, got = storage.read_rows(tenant.region, after.data_prefix)
        assert after.row_count == len(got) == 10 * 1024
        amounts = {r[0]: r[1] for r in got}
        assert amounts["u007168"] == 7169
        assert amounts["u007167"] == 7167


def test_a_full_refresh_compares_only_the_parts_that_differ_from_the_old_ones(tenant: Tenant, monkeypatch) -> None:
    """A new part equal to an old part whose rows are all still current (same digest: key range, sources,
    rows, sum of row hashes; no layer key in its range) is left out of the counts' comparison, and so is
    that old part: it is not even downloaded. The counts stay exact, and a repeated key is still found when
    it repeats a key of such a part."""
    monkeypatch.setattr(base, "PART_ROWS", 2048)  # one part per two objects
    downloaded = _recording_downloads(monkeypatch)

    def rows(obj: int, version: int = 0, *, skip: int | None = None, change: int | None = None) -> str:
        return "code,amount\n" + "".join(f"u{i:06d},{i + version + (7 if i == change else 0)}\n"
                                         for i in range(obj * 1024, (obj + 1) * 1024) if i != skip)

    bucket = new_bucket(tenant.region)
    for o in range(10):
        put(tenant.region, bucket, f"rows/{o:02d}.csv", rows(o))
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", tenant.token, {"name": "Refreshed", "kind": "s3", "config": {
            "role_arn": READER_ROLE, "bucket": bucket, "prefix": "rows/", "primary_key": ["code"]}})
        assert st == 201, conn
        ds_id = conn["dataset"]["id"]

        def refresh(mode: str = "FULL_REFRESH") -> tuple[int, int, int]:
            downloaded.clear()
            run = _sync(c, tenant, conn, mode)
            assert run["status"] == "SUCCEEDED", run
            return run["rows_read"], run["rows_written"], run["rows_deleted"]

        assert refresh() == (10240, 10240, 0)
        first = storage.read_manifest(tenant.region, dataset(tenant, ds_id).data_prefix)
        assert len(first.base) == 5 and all("hsum" in p for p in first.parts)
        assert refresh() == (10240, 0, 0)
        assert downloaded == []  # every part equals an old one: nothing of the old snapshot is read

        put(tenant.region, bucket, "rows/07.csv", rows(7, 1))
        assert refresh("INCREMENTAL") == (1024, 1024, 0)  # a layer over the fourth part
        layered = storage.read_manifest(tenant.region, dataset(tenant, ds_id).data_prefix)
        put(tenant.region, bucket, "rows/07.csv", rows(7))  # back as it was: the fourth part's digest again,
        assert refresh() == (10240, 1024, 0)  # but the layer had changed its rows
        assert sorted(downloaded) == sorted([layered.layers[0]["upserts"], layered.base[3]])

        put(tenant.region, bucket, "rows/07.csv", rows(7, 1))
        assert refresh("INCREMENTAL") == (1024, 1024, 0)
        layered = storage.read_manifest(tenant.region, dataset(tenant, ds_id).data_prefix)
        put(tenant.region, bucket, "rows/07.csv", rows(7, 2))
        put(tenant.region, bucket, "rows/02.csv", rows(2, skip=2048, change=2049))
        assert refresh() == (10239, 1025, 1)
        # the layer (to see which old parts it overrides), the second part (its rows differ) and the fourth
        # (the layer overrides it); the first, third and fifth equal new parts
        assert sorted(downloaded) == sorted({layered.layers[0]["upserts"], layered.base[1], layered.base[3]})

        put(tenant.region, bucket, "rows/10.csv", "code,amount\nu000005,99\n")  # repeats a key of the first part
        assert refresh() == (10240, 1, 0)
        after = dataset(tenant, ds_id)
        names, got = storage.read_rows(tenant.region, after.data_prefix)
        assert after.row_count == len(got) == 10239
        assert [r for r in got if r[0] == "u000005"] == [("u000005", 99)]  # the last object's row wins


def test_a_layer_key_within_a_parts_range_but_not_in_it_leaves_that_part_out_of_the_comparison(
        tenant: Tenant, monkeypatch) -> None:
    """A part's key range only bounds its keys: a layer key that falls in the range of an old part equal to a
    new one is looked up in that part, and the part, not holding it, is still left out of the comparison."""
    monkeypatch.setattr(base, "PART_ROWS", 2048)
    downloaded = _recording_downloads(monkeypatch)
    compared: list[list[str]] = []
    real_view = reading.old_view

    def old_view(con, region, tmp, old, spec, local=None):
        compared.append(list(old.base))
        return real_view(con, region, tmp, old, spec, local)

    monkeypatch.setattr(reading, "old_view", old_view)

    def extra(version: int) -> str:  # keys between the first object's, in a part of their own
        return "code,amount\n" + "".join(f"u00000{i}x,{i + version}\n" for i in (5, 6, 7))

    bucket = new_bucket(tenant.region)
    for o in range(4):
        put(tenant.region, bucket, f"rows/{o:02d}.csv",
            "code,amount\n" + "".join(f"u{i:06d},{i}\n" for i in range(o * 1024, (o + 1) * 1024)))
    put(tenant.region, bucket, "rows/04.csv", extra(0))
    with client() as c:
        st, conn = call(c, "POST", "/v1/connectors", tenant.token, {"name": "Between", "kind": "s3", "config": {
            "role_arn": READER_ROLE, "bucket": bucket, "prefix": "rows/", "primary_key": ["code"]}})
        assert st == 201, conn
        ds_id = conn["dataset"]["id"]
        for mode, version, want in (("FULL_REFRESH", 0, (4099, 4099, 0)), ("INCREMENTAL", 1, (3, 3, 0)),
                                    ("FULL_REFRESH", 2, (4099, 3, 0))):
            put(tenant.region, bucket, "rows/04.csv", extra(version))
            before = storage.read_manifest(tenant.region, dataset(tenant, ds_id).data_prefix) if version else None
            downloaded.clear()
            compared.clear()
            run = _sync(c, tenant, conn, mode)
            assert (run["status"], run["rows_read"], run["rows_written"], run["rows_deleted"]) == ("SUCCEEDED", *want)
    assert len(before.base) == 3 and len(before.layers) == 1
    assert before.parts[0]["lo"] <= '["u000005x"]' <= before.parts[0]["hi"]  # the layer's keys are in its range
    assert before.base[0] in downloaded  # looked up
    assert compared == [[before.base[2]]]  # only the third object's old part is compared with the new rows
    names, got = storage.read_rows(tenant.region, dataset(tenant, ds_id).data_prefix)
    assert len(got) == 4099 and ("u000006x", 8) in got


def test_an_incremental_change_too_big_for_a_layer_compacts_with_the_same_rows(tenant: Tenant, monkeypatch) -> None:
    monkeypatch.setattr(layers, "COMPACT_MIN_ROWS", 0)
    monkeypatch.setattr(layers, "COMPACT_FRACTION", 0.01)  # 100 changed keys of 2,000 rows: past it
    with client() as c:
        bucket, conn, ds_id = _first_sync(c, tenant, 4, "Compacted rows")
        before = dataset(tenant, ds_id).data_prefix
        put(tenant.region, bucket, "rows/02.csv", _csv(2, changed=True))
        run = _sync(c, tenant, conn, "INCREMENTAL")
        assert (run["status"], run["rows_written"], run["rows_deleted"]) == ("SUCCEEDED", 75, 25), run
        ds = dataset(tenant, ds_id)
        manifest = storage.read_manifest(tenant.region, ds.data_prefix)
        assert manifest.layers == []
        assert ds.data_prefix != before
        assert all(k.startswith(ds.data_prefix + "/") for k in manifest.base)
        assert len(manifest.parts) == len(manifest.base)
        ids = {r[0] for r in storage.read_rows(tenant.region, ds.data_prefix)[1]}
        assert ds.row_count == len(ids) == 4 * PER_OBJECT
        assert 1050 not in ids
        assert 100_200 in ids


def test_a_prune_by_name_deletes_nothing_outside_its_dataset(tenant: Tenant) -> None:
    """The files a manifest says it replaced are deleted only under the dataset's own root: a manifest naming
    another dataset's file (or the workspace's) cannot make a prune delete it."""
    bucket = aws.bucket_name(storage.BUCKET, tenant.region)
    s3 = aws.client("s3", tenant.region)
    mine = storage.dataset_root(tenant.workspace_id, "ds_mine") + "sync_a-a1/part-00000.parquet"
    other = storage.dataset_root(tenant.workspace_id, "ds_other") + "sync_b-a1/part-00000.parquet"
    near = storage.dataset_root(tenant.workspace_id, "ds_mine2") + "sync_c-a1/part-00000.parquet"  # a longer id
    for key in (mine, other, near):
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    removed = storage.prune(tenant.region, tenant.workspace_id, "ds_mine", set(), candidates=[mine, other, near])
    assert removed == 1
    assert s3.list_objects_v2(Bucket=bucket, Prefix=mine).get("KeyCount") == 0
    assert s3.list_objects_v2(Bucket=bucket, Prefix=other)["KeyCount"] == 1
    assert s3.list_objects_v2(Bucket=bucket, Prefix=near)["KeyCount"] == 1
