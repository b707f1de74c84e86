"""Sync stages share the process's DuckDB: each works in a catalog of its own, which goes when it closes,
with the database-wide settings; a database that refuses a new stage is replaced."""
from __future__ import annotations

import os
import threading

from chalicelib.gateway.ingest import typed_rows


def test_stages_do_not_see_each_others_tables() -> None:
    a, b = typed_rows.open_stage(), typed_rows.open_stage()
    try:
        assert a.con is not b.con and a.workdir != b.workdir
        a.con.execute("CREATE TABLE incoming AS SELECT 1 AS n")
        b.con.execute("CREATE TABLE incoming AS SELECT 2 AS n, 3 AS m")  # the same name, no clash
        assert a.con.execute("SELECT * FROM incoming").fetchall() == [(1,)]
        assert b.con.execute("SELECT * FROM incoming").fetchall() == [(2, 3)]
        settings = a.con.execute("SELECT current_setting('threads'), current_setting('TimeZone'), "
                                 "py_json_str('a\"b')").fetchone()
        assert settings[0] == typed_rows.THREADS and settings[1].endswith("UTC") and settings[2] == '"a\\"b"'
    finally:
        a.close()
        b.close()


def test_a_closed_stage_leaves_no_catalog_or_directory() -> None:
    stage = typed_rows.open_stage()
    stage.con.execute("CREATE TABLE run_rows AS SELECT range AS n FROM range(1000)")
    workdir, catalog = stage.workdir, stage._catalog
    db = typed_rows._database()
    stage.close()
    assert not os.path.exists(workdir)
    names = {r[0] for r in db.execute("SELECT database_name FROM duckdb_databases()").fetchall()}
    assert catalog not in names and "memory" in names
    assert typed_rows._database() is db  # reused by the next stage


def test_a_database_that_refuses_a_stage_is_replaced() -> None:
    broken = typed_rows._database()
    broken.close()  # as after a fatal error: every new connection of it fails
    stage = typed_rows.open_stage()
    try:
        assert typed_rows._database() is not broken
        assert stage.con.execute("SELECT 41 + 1").fetchone() == (42,)
    finally:
        stage.close()


def test_stages_on_threads_each_keep_their_rows() -> None:
    seen: dict[int, list] = {}

    def work(n: int) -> None:
        stage = typed_rows.open_stage()
        try:
            stage.con.execute(f"CREATE TABLE incoming AS SELECT {n} AS n FROM range(5000)")
            seen[n] = stage.con.execute("SELECT min(n), max(n), count(*) FROM incoming").fetchall()
        finally:
            stage.close()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {n: [(n, n, 5000)] for n in range(6)}
