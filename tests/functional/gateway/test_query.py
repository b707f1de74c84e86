"""Federated query answers: the byte cap with paging, and engine errors that name nothing internal."""
from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from chalicelib.gateway.query import service as query_mod
from tests.functional.conftest import Tenant
from tests.functional.gateway.data import World, build_world, query


@pytest.fixture
def world(tenant: Tenant) -> Iterator[World]:
    yield from build_world(tenant)


def test_a_huge_answer_is_cut_at_the_byte_cap_and_pages_on(world: World) -> None:
    sql = "SELECT i, repeat('x', 20000) AS blob FROM range(2000) t(i) ORDER BY i"
    status, page = query(world, "SELECT repeat('x',20000) FROM range(2000)", limit=10_000)
    assert status == 200
    encoded = len(json.dumps(page["rows"], separators=(",", ":")))
    assert encoded <= query_mod.MAX_ANSWER_BYTES < 2000 * 20_000  # the whole result would be 40 MB
    assert page["truncated"] is True
    assert page["truncated_reason"] == "byte_limit"
    assert page["next_cursor"]
    assert 0 < page["row_count"] == len(page["rows"]) < 2000
    # paging with the cursor walks the whole result once, in order, each page under the cap
    seen: list[int] = []
    after = None
    for _ in range(200):
        status, page = query(world, sql, limit=10_000, **({"after": after} if after else {}))
        assert status == 200, page
        assert len(json.dumps(page["rows"], separators=(",", ":"))) <= query_mod.MAX_ANSWER_BYTES
        seen += [r[0] for r in page["rows"]]
        after = page["next_cursor"]
        if not after:
            break
    assert seen == list(range(2000))
    assert page["truncated"] is False
    assert page["truncated_reason"] is None


def test_row_limit_pages_and_cursors_are_bound_to_their_sql(world: World) -> None:
    status, page = query(world, "SELECT i FROM range(5) t(i) ORDER BY i", limit=2)
    assert status == 200
    assert page["rows"] == [[0], [1]]
    assert page["truncated_reason"] == "row_limit"
    status, nxt = query(world, "SELECT i FROM range(5) t(i) ORDER BY i", limit=2, after=page["next_cursor"])
    assert nxt["rows"] == [[2], [3]]
    status, body = query(world, "SELECT i FROM range(50) t(i) ORDER BY i", limit=2, after=page["next_cursor"])
    assert status == 400
    assert body["code"] == "validation_failed"
    assert "rows" not in body
    status, body = query(world, "SELECT 1", after="not-a-cursor")
    assert status == 400
    assert body["errors"][0]["field"] == "after"


def test_one_row_above_the_cap_is_a_clear_422(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(query_mod, "MAX_ANSWER_BYTES", 10_000)
    status, body = query(world, "SELECT repeat('x', 20000)")
    assert status == 422
    assert body["code"] == "row_too_large"
    assert "xxxx" not in json.dumps(body)


@pytest.mark.parametrize("sql", [
    "SELECT * FROM test_all_types()",  # needs a Python module: DuckDB answers with a traceback
    "SELECT * FROM sqlite_mastr",  # "Did you mean sqlite_master?"
    "SELECT * FROM duckdb_tablez()",  # "Did you mean duckdb_tables?"
    "SELECT * FROM information_schema.tablez",
    "SELECT * FROM pg_catalog.pg_clas",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM customerz",  # near a dataset's name: no suggestion either
    "SELECT nope FROM range(3)",
    "SELECT current_setting('home_directory')",
])
def test_engine_errors_name_nothing_internal(world: World, sql: str) -> None:
    status, body = query(world, sql)
    assert 400 <= status < 500, body
    assert body["code"] in ("sql_error", "sql_syntax_error", "sql_not_allowed"), body
    text = json.dumps(body)
    for leak in ("Traceback", "File \\\"", ".py", "/usr", "/tmp", "site-packages", "Did you mean", "Candidate",
                 "sqlite_master", "duckdb_tables", "pg_class", "pytz", "/etc/passwd", "customers", "gwq-", "LINE 1"):
        assert leak not in text, (leak, text)
    assert body["detail"]


def test_engine_errors_still_say_what_the_caller_wrote_wrong(world: World) -> None:
    status, body = query(world, "SELECT cast('abc' AS INTEGER)")
    assert status == 400
    assert "abc" in body["detail"]
    status, body = query(world, "SELEC 1")
    assert status == 400
    assert body["code"] == "sql_syntax_error"
    assert "syntax" in body["detail"].lower()


def test_a_query_that_fails_running_answers_its_own_error_when_its_lineage_cannot_be_recorded(
        world: World, monkeypatch) -> None:
    """The lineage message is sent beside the query; when the queue refuses it the query writes the lineage
    itself; when that fails too, the caller gets the query's error (a 400 naming its SQL mistake) if it has
    one, else a 500: a query never answers with its lineage neither queued nor written."""
    from chalicelib.core.store import queues
    from chalicelib.gateway.catalog import lineage

    def throttled(*args: object, **kwargs: object) -> None:
        raise RuntimeError("throttled")

    monkeypatch.setattr(queues, "enqueue", throttled)
    written: list[str] = []
    real = lineage.record_query
    monkeypatch.setattr(lineage, "record_query", lambda *a, **k: written.append(real(*a, **k)))
    status, body = query(world, "SELECT count(*) FROM customers")
    assert status == 200, body
    assert written and written[0].startswith("qday_")  # written directly, the queue being unavailable
    monkeypatch.setattr(lineage, "record_query", throttled)
    status, body = query(world, "SELECT CAST(country AS INTEGER) FROM customers")  # fails on its first row
    assert status == 400, body
    assert body["code"] == "sql_error"
    assert "throttled" not in json.dumps(body)
    status, body = query(world, "SELECT count(*) FROM customers")
    assert status == 500
    assert "throttled" not in json.dumps(body)


def test_a_query_queues_its_lineage_and_the_worker_writes_it(world: World) -> None:
    """The query sends one message naming the datasets it read and its day; the worker writes the day's
    node from it; a malformed message is refused (kept for redelivery, then the dead-letter queue)."""
    from chalicelib.core import aws
    from chalicelib.gateway import models
    from chalicelib.gateway.catalog import lineage
    from chalicelib.gateway.ingest import sync_worker
    from chalicelib.gateway.query import lineage_queue
    from tests.functional.gateway.sync_helpers import drain, lambda_record, receive

    region, ws = world.tenant.region, world.tenant.workspace_id
    drain(region)
    status, body = query(world, "SELECT count(*) FROM customers")
    assert status == 200, body
    msgs = receive(region)
    bodies = [json.loads(m["Body"]) for m in msgs]
    assert [b["kind"] for b in bodies] == [lineage_queue.KIND]
    assert [d[0] for d in bodies[0]["datasets"]] == [d["id"] for d in body["datasets"]]
    assert not [e for e in models.lineage_edges(region).query(ws) if e.target_type == "query"]  # not yet
    for m in msgs:  # back on the queue for the worker
        aws.client("sqs", region).change_message_visibility(
            QueueUrl=aws.queue_url(lineage_queue.QUEUE, region), ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
    drain(region)
    node = lineage.query_node([d["id"] for d in body["datasets"]], bodies[0]["day"])
    assert [int(e.uses) for e in models.lineage_edges(region).query(ws) if e.target_id == node] == [1]
    bad = {**bodies[0], "datasets": "customers"}
    out = sync_worker.handle({"Records": [{**lambda_record(msgs[0], region), "body": json.dumps(bad)}]})
    assert out["batchItemFailures"]
    assert [int(e.uses) for e in models.lineage_edges(region).query(ws) if e.target_id == node] == [1]


@pytest.mark.parametrize("sql", [
    "SELECT * FROM query('SELECT name, value FROM duck' || 'db_settings()')",
    "SELECT current_setting('temp_directory')",
    "SELECT * FROM pragma_database_list",
    "SELECT * FROM duckdb_databases()",
    "SELECT name, setting FROM pg_settings",
])
def test_engine_settings_and_databases_are_out_of_reach(world: World, sql: str) -> None:
    status, body = query(world, sql)
    assert status == 400, body
    assert body["code"] == "sql_not_allowed"
    assert "gwq-" not in json.dumps(body) and "rows" not in body
    # the same sandbox still answers ordinary SQL over the caller's own tables
    status, page = query(world, "SELECT count(*) FROM information_schema.tables")
    assert status == 200, page
