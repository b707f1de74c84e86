"""Gateway read side: GraphQL end to end beside REST (both verify the token and read the membership),
the federated join of two datasets with masking (beside a bare DuckDB connection), and the daily mix of the four
internal components in requests per second per core. Runs in-process against moto."""
from __future__ import annotations

import json
import os
import random
import shutil
import sys
import tempfile
import time

from bench.bench_catalog import seed
from bench.common import (
    MIN_P99_SAMPLES,
    AwsCalls,
    Measure,
    measure,
    measure_pair,
    percentile,
    quiet,
    table,
    use_emulator,
)

use_emulator()

N_DATASETS = 1_000  # catalog search itself: bench_catalog.py
N_ROWS = 100_000
MIX = {"knowledge": 4_200_000, "chat": 1_800_000, "agent": 640_000, "dashboard": 210_000}


def main() -> None:
    from moto import mock_aws

    with mock_aws():
        _run()
    with mock_aws():
        query_main()
    query_remote_main()


def _run() -> None:
    from chalice.test import Client

    from chalicelib.gateway.catalog import service as catalog
    from chalicelib.groups import create_app
    from infra.bootstrap import bootstrap_all
    from tests.functional.conftest import make_tenant
    from tests.functional.gateway.data import field, put_connector, put_dataset, token_for

    bootstrap_all()
    t = make_tenant("bench@example.com", name="Bench")
    ws, region = t.workspace_id, t.region
    conn = put_connector(ws, region, "warehouse")
    ids = seed(ws, region, N_DATASETS, conn)
    tickets = put_dataset(ws, region, "tickets", [field("id", "INTEGER"), field("requester", "STRING", "PII", "MASK"),
                                                  field("subject", "STRING")],
                          [(i, f"user{i}@example.com", f"printer broken {i}") for i in range(1000)])
    member = token_for(ws, "member")
    catalog.invalidate()

    # --- GraphQL end to end vs REST, through the Chalice test client ----------------------------
    app = create_app("gateway")
    h = {"Authorization": f"Bearer {member.token}", "Content-Type": "application/json"}
    with Client(app) as c:
        small = json.dumps({"query": f'{{ dataset(id: "{ids[1]}") {{ id name freshness classification }} }}'})
        page = json.dumps({"query": "{ datasets(first: 25) { totalCount edges { cursor node { id name owner freshness "
                                    "classification schema { name policy } } } pageInfo { hasNextPage endCursor } } }"})
        assert "errors" not in json.loads(c.http.post("/graphql", headers=h, body=small).body)
        rows = [
            (*measure_pair("POST /graphql dataset(id) small query", lambda: c.http.post("/graphql", headers=h, body=small),
                           "GET /v1/catalog/datasets/{id} (same data, REST)",
                           lambda: c.http.get(f"/v1/catalog/datasets/{ids[1]}", headers=h), n=30, repeat=3, warmup=5), ""),
            (*measure_pair("POST /graphql datasets(first: 25)", lambda: c.http.post("/graphql", headers=h, body=page),
                           "GET /v1/catalog/datasets?limit=25 (REST)",
                           lambda: c.http.get("/v1/catalog/datasets?limit=25", headers=h), n=10, repeat=3, warmup=3), ""),
        ]
        table("GraphQL end to end (Chalice test client, token verification included)", rows)

        # --- mixed workload --------------------------------------------------------------------
        total = sum(MIX.values())
        calls = {
            "knowledge": lambda i: c.http.get(f"/v1/catalog/datasets?q=orders%20{i % 100}&limit=25", headers=h),
            "chat": lambda i: c.http.post("/v1/query", headers=h, body=json.dumps(
                {"sql": f"SELECT id, subject, requester FROM tickets WHERE id = {i % 1000}", "limit": 5})),
            "agent": lambda i: c.http.post("/graphql", headers=h, body=json.dumps(
                {"query": f'{{ dataset(id: "{tickets}") {{ name freshness schema {{ name policy }} }} }}'})),
            "dashboard": lambda i: c.http.get("/v1/connectors", headers=h),
        }
        schedule: list[str] = []
        for name, per_day in MIX.items():
            schedule += [name] * round(400 * per_day / total)
        random.Random(1).shuffle(schedule)
        for name in calls:
            calls[name](0)
        per_kind: dict[str, list[float]] = {k: [] for k in calls}
        start = time.perf_counter()
        for i, name in enumerate(schedule):
            t1 = time.perf_counter()
            r = calls[name](i)
            per_kind[name].append(time.perf_counter() - t1)
            assert r.status_code == 200, (name, r.body[:200])
        elapsed = time.perf_counter() - start
        rps = len(schedule) / elapsed
        need = total / 86400
        print("### Mixed workload (daily ratio 4.2M : 1.8M : 640k : 210k), one thread = one core\n")
        print("| component | gateway call | share | median ms | p99 ms |\n|---|---|---:|---:|---:|")
        labels = {"knowledge": "GET /v1/catalog/datasets?q=..", "chat": "POST /v1/query (1k-row dataset, masked)",
                  "agent": "POST /graphql dataset(id){schema}", "dashboard": "GET /v1/connectors"}
        for name, times in per_kind.items():
            times.sort()
            print(f"| {name} | {labels[name]} | {len(times) / len(schedule):.1%} | {times[len(times) // 2] * 1e3:.1f} | "
                  f"{times[min(len(times) - 1, int(len(times) * 0.99))] * 1e3:.1f} |")
        ref = measure("GET /v1/openapi.json (public, same client)", lambda: c.http.get("/v1/openapi.json"), n=100, repeat=3)
        print(f"\n**{rps:.1f} requests/s per core** over {len(schedule)} requests ({elapsed:.1f} s); the daily volume "
              f"({total:,}/day) averages {need:.1f} requests/s, i.e. {need / rps:.2f} cores at this rate. "
              f"Reference: a public route through the same client runs {ref.ops_per_s:,.0f}/s.\n", flush=True)
        _ = Measure  # re-exported type for readers of this module


# --- federated query: warm and cold against bare DuckDB, growth 10k / 100k / 1M rows per side ------------

QUERY_SIZES = tuple(size for size in ((10_000, 40, 20), (100_000, 40, 20), (1_000_000, 20, 5))  # rows per side, warm
                    if size[0] <= int(os.environ.get("BENCH_QUERY_MAX_ROWS", "1000000")))  # n, cold n
if os.environ.get("BENCH_QUERY_ROWS"):  # e.g. BENCH_QUERY_ROWS=100000 while iterating (a full run uses every size)
    QUERY_SIZES = tuple(q for q in QUERY_SIZES if str(q[0]) in os.environ["BENCH_QUERY_ROWS"].split(","))
QUERY_SQL = ("SELECT c.country, count(*) AS orders, count(DISTINCT c.email) AS buyers, sum(o.amount) AS total "
             "FROM {c} c JOIN {o} o ON o.customer_id = c.id GROUP BY 1 ORDER BY 1")


def _query_tables(ws: str, region: str, tmp: str, rows: int
                  ) -> tuple[dict[str, list[dict]], dict[str, str], dict[str, str]]:
    """customers_<n> (id, email MASK, name HASH, country) and orders_<n> as Parquet snapshots in the data bucket
    and catalog rows; returns the fields, the local Parquet file and the object key of each."""
    import duckdb

    from chalicelib.core import aws, clock
    from chalicelib.core.ids import new_id
    from chalicelib.gateway import models, storage
    from chalicelib.gateway.catalog import service as catalog
    from tests.functional.gateway.data import field

    tables = {
        f"customers_{rows}": ([field("id", "INTEGER"), field("email", "STRING", "PII", "MASK"),
                               field("name", "STRING", "PII", "HASH"), field("country", "STRING", "PUBLIC")],
                              f"SELECT i AS id, 'user' || i || '@example.com' AS email, 'Name ' || i AS name, "
                              f"['US','DE','FR','BR'][1 + i % 4] AS country, 'x' AS _source FROM range({rows}) t(i)"),
        f"orders_{rows}": ([field("order_id", "INTEGER"), field("customer_id", "INTEGER"),
                            field("amount", "FLOAT", "CONFIDENTIAL")],
                           f"SELECT i AS order_id, (i * 7919) % {rows} AS customer_id, (i % 1000) / 10.0 AS amount, "
                           f"'x' AS _source FROM range({rows}) t(i)"),
    }
    con = duckdb.connect()
    fields: dict[str, list[dict]] = {}
    files: dict[str, str] = {}
    keys: dict[str, str] = {}
    for name, (flds, select) in tables.items():
        path = os.path.join(tmp, f"{name}.parquet")
        con.execute(f"COPY ({select}) TO '{path}' (FORMAT parquet)")
        ds_id = new_id("ds")
        prefix = f"datasets/{ws}/{ds_id}/s1-a1"
        key = f"{prefix}/part-00000.parquet"
        aws.client("s3", region).upload_file(path, aws.bucket_name("data", region), key)
        # the snapshot layout a sync writes: the part plus its manifest (without one, every read lists the prefix)
        aws.client("s3", region).put_object(
            Bucket=aws.bucket_name("data", region), Key=f"{prefix}/{storage.MANIFEST}",
            Body=storage.Manifest(base=[key], row_count=rows, base_rows=rows).to_json().encode())
        now = clock.iso()
        models.datasets(region)(ws, ds_id, name=name, owner="bench@example.com", schema=json.dumps(flds),
                                acl=json.dumps([{"type": "role", "id": "member"}]), data_prefix=prefix,
                                row_count=rows, last_synced_at=now, created_at=now, updated_at=now).save()
        fields[name], files[name], keys[name] = flds, path, key
    con.close()
    catalog.invalidate(ws)
    return fields, files, keys


def _projected_reference(ws: str, region: str, fields: dict[str, list[dict]], files: dict[str, str]) -> object:
    """A warm bare DuckDB (1 thread) holding the same policy-projected tables (every visible column)."""
    import duckdb

    from chalicelib.gateway.catalog import fieldpolicy

    ipad, opad = fieldpolicy.hmac_pads(fieldpolicy.workspace_hash_key(region, ws))
    con = duckdb.connect(config={"threads": 1})
    for name, flds in fields.items():
        items = ", ".join(fieldpolicy.projection(f["name"], f["policy"], True) for f in flds)
        con.execute(f"CREATE TABLE {name} AS SELECT {items} FROM read_parquet('{files[name]}')",
                    {"ipad": ipad, "opad": opad} if "$ipad" in items else None)
    return con


def _span(xs: list[float]) -> str:
    """Median milliseconds with [min-max]."""
    import statistics

    return f"{statistics.median(xs) * 1e3:.1f} [{min(xs) * 1e3:.1f}-{max(xs) * 1e3:.1f}]"


def _samples(pairs: list[tuple[str, object]], n: int, before: object = None) -> dict[str, list[float]]:
    """``n`` timings of each callable, interleaved (order alternating every round); ``before`` runs untimed
    ahead of every call (the cold reset)."""
    out: dict[str, list[float]] = {label: [] for label, _ in pairs}
    for i in range(n):
        for label, fn in (pairs if i % 2 == 0 else pairs[::-1]):
            if before is not None:
                before()
            t0 = time.perf_counter()
            fn()
            out[label].append(time.perf_counter() - t0)
    return out


def query_main() -> None:
    """The query section: run inside ``mock_aws``."""
    import statistics

    import duckdb

    from chalicelib.core import aws
    from chalicelib.core.config import settings
    from chalicelib.core.tenancy import scope_of
    from chalicelib.core.tokens import verifier
    from chalicelib.gateway.catalog import fieldpolicy
    from chalicelib.gateway.query import cache as query_cache
    from chalicelib.gateway.query import columns as query_columns
    from chalicelib.gateway.query import service as query
    from infra.bootstrap import bootstrap_all
    from tests.functional.conftest import make_tenant
    from tests.functional.gateway.data import token_for

    bootstrap_all()
    t = make_tenant("bench-query@example.com", name="Bench query")
    ws, region = t.workspace_id, t.region
    principal = verifier().principal(token_for(ws, "member").token)
    scope = scope_of(principal)
    settings.cache_clear()  # default settings: the catalog version is checked on every query
    tmp = tempfile.mkdtemp(prefix="gwq-bench-")
    lines = ["### Federated query: 2 x N rows, join, masked column read, hashed column unread", "",
             "Ours is `query.run` (catalog lookup, binder column pruning, sandbox cache, lock-down, JSON rows, "
             "lineage write to DynamoDB in moto). Warm reference: the same SQL on a warm bare DuckDB holding the same "
             "policy-projected tables. Cold: our first query of a container (sandbox cache, binder and hash key "
             "cleared; the catalog snapshot stays loaded) against a new bare DuckDB over the raw Parquet, which it first "
             "gets from the same bucket with the same S3 client (one GET per object, as ours; moto in process), "
             "its connection closed after the timing as ours stays open; and against a new bare DuckDB over the same "
             "Parquet already on local disk (the download excluded). Both read snapshots laid out as a sync "
             "writes them (Parquet part plus manifest). Default settings (the catalog version checked on every "
             "query). AWS calls are those of one call of ours, with the median time spent inside them over 5 calls "
             "(moto in process: the emulator's work, part of ours). "
             "1 thread everywhere; calls interleaved; p99 printed only with >= 20 samples.", "",
             "| rows per side | case | samples | AWS calls (median time inside them) | ours p50 ms [min-max] | ours p99 ms | ref p50 ms [min-max] "
             "| ref p99 ms | ratio p50 | target |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]

    def cold_reset() -> None:
        query_cache.clear()
        query_columns._close()  # the binder's DuckDB and its memo
        fieldpolicy.workspace_hash_key.cache_clear()

    bare: list[object] = []  # the cold reference's connection, closed untimed by the reset

    def cold_reset_both() -> None:
        cold_reset()
        while bare:  # a container keeps its connection: closing is not part of its first query
            bare.pop().close()

    held: list[str] = []
    with quiet():  # no log line is written while measuring
        for rows, n_warm, n_cold in QUERY_SIZES:
            fields, files, keys = _query_tables(ws, region, tmp, rows)
            c, o = list(fields)
            sql = QUERY_SQL.format(c=c, o=o)
            ref_con = _projected_reference(ws, region, fields, files)
            expect = [list(r) for r in ref_con.execute(sql).fetchall()]
            got = query.run(scope, sql)["rows"]
            assert [r[:3] for r in got] == [r[:3] for r in expect], (got, expect)

            def bare_cold(sql: str = sql, c: str = c, o: str = o, keys: dict = keys) -> object:
                # A cold bare DuckDB gets the Parquet where it lives too: the same objects, one GET each with the
                # same S3 client, streamed to local files (as ours does), then read in place without policies.
                local = os.path.join(tmp, "bare")
                os.makedirs(local, exist_ok=True)
                s3, bucket = aws.client("s3", region), aws.bucket_name("data", region)
                for name in (c, o):
                    with open(os.path.join(local, f"{name}.parquet"), "wb") as fh:
                        shutil.copyfileobj(s3.get_object(Bucket=bucket, Key=keys[name])["Body"], fh, 1 << 20)
                con = duckdb.connect(config={"threads": 1})
                bare.append(con)
                con.execute(f"CREATE VIEW {c} AS SELECT * FROM read_parquet('{local}/{c}.parquet')")
                con.execute(f"CREATE VIEW {o} AS SELECT * FROM read_parquet('{local}/{o}.parquet')")
                return con.execute(sql).fetchall()

            local = os.path.join(tmp, "local")  # the same objects, downloaded once, untimed
            os.makedirs(local, exist_ok=True)
            for name in (c, o):
                with open(os.path.join(local, f"{name}.parquet"), "wb") as fh:
                    s3 = aws.client("s3", region)
                    shutil.copyfileobj(s3.get_object(Bucket=aws.bucket_name("data", region), Key=keys[name])["Body"],
                                       fh, 1 << 20)

            def bare_cold_local(sql: str = sql, c: str = c, o: str = o, local: str = local) -> object:
                con = duckdb.connect(config={"threads": 1})
                bare.append(con)
                con.execute(f"CREATE VIEW {c} AS SELECT * FROM read_parquet('{local}/{c}.parquet')")
                con.execute(f"CREATE VIEW {o} AS SELECT * FROM read_parquet('{local}/{o}.parquet')")
                return con.execute(sql).fetchall()

            for label, fn, ref, n, reset, target in (
                    ("warm", lambda sql=sql: query.run(scope, sql),
                     lambda con=ref_con, sql=sql: con.execute(sql).fetchall(), n_warm, None,
                     "<= 1.5x, p50 <= 50 ms" if rows == 100_000 else ""),
                    ("cold, ref downloads", lambda sql=sql: query.run(scope, sql), bare_cold, n_cold,
                     cold_reset_both, "<= 2x" if rows == 100_000 else ""),
                    ("cold, ref Parquet local", lambda sql=sql: query.run(scope, sql), bare_cold_local, n_cold,
                     cold_reset_both, "")):
                for _ in range(2):  # warm-up of both
                    fn()
                    ref()
                    if reset is not None:
                        reset()
                inside, aws_calls = [], AwsCalls()  # the calls of one of ours and the time inside them, 5 times
                for _ in range(5):
                    if reset is not None:
                        reset()
                    aws_calls.reset()
                    fn()
                    inside.append(aws_calls.seconds)
                calls = sum(aws_calls.seen.values())
                aws_calls.close()
                got_t = _samples([("ours", fn), ("ref", ref)], n, reset)
                ours, theirs = got_t["ours"], got_t["ref"]
                p99 = (lambda xs: f"{percentile(xs, 0.99) * 1e3:.1f}") if n >= MIN_P99_SAMPLES else (lambda xs: "-")
                ratio = statistics.median(ours) / statistics.median(theirs)
                lines.append(f"| {rows:,} | {label} | {n} | {calls} ({statistics.median(inside) * 1e3:.1f} ms) | "
                             f"{_span(ours)} | {p99(ours)} | "
                             f"{_span(theirs)} | {p99(theirs)} | {ratio:.2f}x | {target} |")
                print(lines[-1], file=sys.stderr, flush=True)
                if label == "warm":
                    held.append(f"{rows:,} rows per side: {query_cache.held_bytes() / 2**20:.1f} MiB")
            ref_con.close()
            query_cache.clear()
    lines.append("")
    big = QUERY_SIZES[-1]
    lines.append(f"The {big[0]:,}-row case is sampled {big[1]} times warm and {big[2]} times cold "
                 "(no p99 below 20 samples). Cached sandbox after the warm runs (the columns read only, "
                 "`duckdb_memory()`): " + "; ".join(held) + ".")
    print("\n".join(lines) + "\n", flush=True)


def query_remote_main(rows: int = 100_000, n: int = 40) -> None:
    """The warm query again with AWS in a process of its own (a moto server over loopback), as AWS is for a
    function: a call waits on a socket, so what the query overlaps with its calls (``aws.alongside``) shows,
    where the in-process emulator's work holds this process's interpreter lock."""
    import statistics

    from chalicelib.core import process_state
    from chalicelib.core.config import settings
    from chalicelib.core.tenancy import scope_of
    from chalicelib.core.tokens import verifier
    from chalicelib.gateway.query import cache as query_cache
    from chalicelib.gateway.query import service as query
    from infra.bootstrap import bootstrap_all
    from infra.emulator.process import moto_process
    from tests.functional.conftest import make_tenant
    from tests.functional.gateway.data import token_for

    with moto_process(dict(os.environ)) as endpoint:
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        try:
            settings.cache_clear()
            process_state.reset_all(derived=True)  # clients and tables made for the in-process emulator
            bootstrap_all()
            t = make_tenant("bench-query-remote@example.com", name="Bench query remote")
            principal = verifier().principal(token_for(t.workspace_id, "member").token)
            scope = scope_of(principal)
            tmp = tempfile.mkdtemp(prefix="gwq-bench-remote-")
            with quiet():
                fields, files, _ = _query_tables(t.workspace_id, t.region, tmp, rows)
                c, o = list(fields)
                sql = QUERY_SQL.format(c=c, o=o)
                ref_con = _projected_reference(t.workspace_id, t.region, fields, files)
                for _ in range(2):
                    query.run(scope, sql)
                    ref_con.execute(sql).fetchall()
                calls = AwsCalls()
                inside = []
                for _ in range(5):
                    calls.reset()
                    query.run(scope, sql)
                    inside.append(calls.seconds)
                count = sum(calls.seen.values())
                calls.close()
                got = _samples([("ours", lambda: query.run(scope, sql)),
                                ("ref", lambda: ref_con.execute(sql).fetchall())], n)
                ref_con.close()
                query_cache.clear()
            shutil.rmtree(tmp, ignore_errors=True)
        finally:
            del os.environ["AWS_ENDPOINT_URL"]
    ours, theirs = got["ours"], got["ref"]
    print("### Federated query, warm, AWS in its own process\n\n"
          "The warm row above again, with every AWS call sent to a moto server in a process of its own over "
          "loopback, as AWS is for a function: a call waits on a socket, so the work a query overlaps with its "
          "calls shows (the catalog version read alongside the query's own work, the lineage write alongside "
          "its run: `aws.alongside`). In process, the emulator's work holds this process's interpreter lock "
          "and little overlaps. The time inside the calls counts from this process (wire and server).\n\n"
          "| rows per side | case | samples | AWS calls (median time inside them) | ours p50 ms [min-max] | ours p99 ms "
          "| ref p50 ms [min-max] | ref p99 ms | ratio p50 | target |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---|\n"
          f"| {rows:,} | warm, AWS over loopback | {n} | {count} ({statistics.median(inside) * 1e3:.1f} ms) | "
          f"{_span(ours)} | {percentile(ours, 0.99) * 1e3:.1f} | {_span(theirs)} | {percentile(theirs, 0.99) * 1e3:.1f} | "
          f"{statistics.median(ours) / statistics.median(theirs):.2f}x | <= 1.5x, p50 <= 50 ms |\n", flush=True)


if __name__ == "__main__":
    main()
