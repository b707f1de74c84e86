"""Gateway read side: catalog search over 10k datasets, GraphQL end to end, federated join of two
100k-row datasets with masking (beside a bare DuckDB connection), and the daily mix of the four
internal components in requests per second per core. Runs in-process against moto."""
from __future__ import annotations

import json
import os
import random
import tempfile
import time

for _name in [n for n in os.environ if n.startswith("AWS_ENDPOINT_URL")]:
    del os.environ[_name]
os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
                   "AWS_DEFAULT_REGION": "us-east-1", "RESOURCE_PREFIX": "aiplat-bench", "LOG_LEVEL": "WARNING"})

from bench.common import Measure, measure, table  # noqa: E402

N_DATASETS = 10_000
N_ROWS = 100_000
MIX = {"knowledge": 4_200_000, "chat": 1_800_000, "agent": 640_000, "dashboard": 210_000}


def _seed_catalog(ws: str, region: str, connector_id: str) -> list[str]:
    from chalicelib.core import clock
    from chalicelib.core.ids import new_id
    from chalicelib.gateway import models

    cls = models.datasets(region)
    rnd = random.Random(5)
    words = ["orders", "customers", "tickets", "invoices", "events", "sessions", "leads", "payments", "churn", "usage"]
    ids = []
    now = clock.iso()
    with cls.batch_write() as batch:
        for i in range(N_DATASETS):
            ds_id = new_id("ds")
            ids.append(ds_id)
            fields = [{"name": f"{rnd.choice(words)}_{j}", "type": "STRING", "nullable": True,
                       "classification": rnd.choice(["PUBLIC", "INTERNAL", "CONFIDENTIAL", "PII"]),
                       "policy": rnd.choice(["ALLOW", "MASK", "HASH"]), "description": ""} for j in range(8)]
            acl = [{"type": "role", "id": "member"}] if i % 4 else [{"type": "role", "id": "admin"}]
            batch.save(cls(ws, ds_id, name=f"{words[i % len(words)]}_{i:05d}", connector_id=connector_id,
                           owner=f"team{i % 20}@example.com", description=f"{words[(i * 7) % len(words)]} table {i}",
                           classification="PII", schema=json.dumps(fields), acl=json.dumps(acl), data_prefix=None,
                           row_count=0, last_synced_at=clock.iso(clock.now() - rnd.randint(60, 86400 * 3)),
                           created_at=now, updated_at=now))
    return ids


def _big_tables(ws: str, region: str, tmp: str) -> tuple[str, str, list[str]]:
    """customers_big and orders_big (100k rows each) as catalog rows + Parquet; returns their files too."""
    import duckdb

    from tests.functional.gateway.data import field, put_dataset, write_parquet  # noqa: F401

    con = duckdb.connect()
    cpath, opath = os.path.join(tmp, "c.parquet"), os.path.join(tmp, "o.parquet")
    con.execute(f"COPY (SELECT i AS id, 'user' || i || '@example.com' AS email, 'Name ' || i AS name, "
                f"['US','DE','FR','BR'][1 + i % 4] AS country, 'x' AS _synced_at FROM range({N_ROWS}) t(i)) "
                f"TO '{cpath}' (FORMAT parquet)")
    con.execute(f"COPY (SELECT i AS order_id, (i * 7919) % {N_ROWS} AS customer_id, (i % 1000) / 10.0 AS amount, "
                f"'x' AS _synced_at FROM range({N_ROWS}) t(i)) TO '{opath}' (FORMAT parquet)")
    from chalicelib.core import aws, clock
    from chalicelib.core.ids import new_id
    from chalicelib.gateway import models

    out = []
    for name, path, fields in (
        ("customers_big", cpath, [field("id", "INTEGER"), field("email", "STRING", "PII", "MASK"),
                                  field("name", "STRING", "PII", "HASH"), field("country", "STRING", "PUBLIC")]),
        ("orders_big", opath, [field("order_id", "INTEGER"), field("customer_id", "INTEGER"),
                               field("amount", "FLOAT", "CONFIDENTIAL")])):
        ds_id = new_id("ds")
        prefix = f"{ws}/datasets/{ds_id}"
        aws.client("s3", region).upload_file(path, aws.bucket_name("data", region), f"{prefix}/part-0.parquet")
        now = clock.iso()
        models.datasets(region)(ws, ds_id, name=name, owner="bench@example.com", schema=json.dumps(fields),
                                acl=json.dumps([{"type": "role", "id": "member"}]), data_prefix=prefix,
                                row_count=N_ROWS, last_synced_at=now, created_at=now, updated_at=now).save()
        out.append(ds_id)
    return out[0], out[1], [cpath, opath]


def main() -> None:
    from moto import mock_aws

    with mock_aws():
        _run()


def _run() -> None:
    import duckdb
    from chalice.test import Client

    from chalicelib.core.config import settings
    from chalicelib.core.tokens import verifier
    from chalicelib.gateway import catalog, query
    from chalicelib.groups import create_app
    from infra.bootstrap import bootstrap_all
    from tests.functional.conftest import make_tenant
    from tests.functional.gateway.data import field, put_connector, put_dataset, token_for

    bootstrap_all()
    t = make_tenant("bench@example.com", name="Bench")
    ws, region = t.workspace_id, t.region
    conn = put_connector(ws, region, "warehouse")
    t0 = time.perf_counter()
    ids = _seed_catalog(ws, region, conn)
    seeded = time.perf_counter() - t0
    tmp = tempfile.mkdtemp(prefix="gwq-bench-")
    cust, orders, files = _big_tables(ws, region, tmp)
    tickets = put_dataset(ws, region, "tickets", [field("id", "INTEGER"), field("requester", "STRING", "PII", "MASK"),
                                                  field("subject", "STRING")],
                          [(i, f"user{i}@example.com", f"printer broken {i}") for i in range(1000)])
    member = token_for(ws, "member")
    principal = verifier().principal(member.token)
    catalog.invalidate()
    print(f"seeded {N_DATASETS:,} catalog rows in {seeded:.1f} s (moto)\n", flush=True)

    # --- catalog search -------------------------------------------------------------------------
    os.environ["CATALOG_CACHE_SECONDS"] = "3600"  # warm figures: the snapshot stays (reload measured apart)
    settings.cache_clear()
    filters = catalog.SearchFilters(text="orders table", classification="PII")
    catalog.search(principal, filters)
    snap = catalog.snapshot(ws)
    plain = [{"name": r.name, "hay": r._haystack, "acl": r.acl} for r in snap.ordered]

    def bare_filter() -> object:
        return [d for d in plain if any(a["id"] == "member" for a in d["acl"]) and "orders" in d["hay"]
                and "table" in d["hay"]][:25]

    def reload() -> object:
        catalog.invalidate(ws)
        return catalog.snapshot(ws)

    rows = [
        (measure("catalog.search text+classification, 10k datasets (warm snapshot)",
                 lambda: catalog.search(principal, filters), n=50, repeat=3, warmup=3),
         measure("bare list filter over the same 10k dicts", bare_filter, n=50, repeat=3, warmup=3), "p99 < 50 ms"),
        (measure("catalog.search fresher_than=PT1H + field_classification", lambda: catalog.search(
            principal, catalog.SearchFilters(fresher_than="PT1H", field_classification="PII")), n=50, repeat=3, warmup=3),
         None, ""),
        (measure("snapshot reload of 10k rows from DynamoDB (moto; once per CATALOG_CACHE_SECONDS)", reload,
                 n=1, repeat=1, warmup=0), None, "amortised by the cache"),
    ]
    table("Catalog search over 10k datasets", rows)

    # --- GraphQL end to end vs REST, through the Chalice test client ----------------------------
    app = create_app("gateway")
    h = {"Authorization": f"Bearer {member.token}", "Content-Type": "application/json"}
    with Client(app) as c:
        small = json.dumps({"query": f'{{ dataset(id: "{ids[1]}") {{ id name freshness classification }} }}'})
        page = json.dumps({"query": "{ datasets(first: 25) { totalCount edges { cursor node { id name owner freshness "
                                    "classification schema { name policy } } } pageInfo { hasNextPage endCursor } } }"})
        assert "errors" not in json.loads(c.http.post("/graphql", headers=h, body=small).body)
        rows = [
            (measure("POST /graphql dataset(id) small query", lambda: c.http.post("/graphql", headers=h, body=small),
                     n=100, repeat=3),
             measure("GET /v1/catalog/datasets/{id} (same data, REST)",
                     lambda: c.http.get(f"/v1/catalog/datasets/{ids[1]}", headers=h), n=100, repeat=3), ""),
            (measure("POST /graphql datasets(first: 25)", lambda: c.http.post("/graphql", headers=h, body=page),
                     n=30, repeat=3, warmup=3),
             measure("GET /v1/catalog/datasets?limit=25 (REST)",
                     lambda: c.http.get("/v1/catalog/datasets?limit=25", headers=h), n=30, repeat=3, warmup=3), ""),
        ]
        table("GraphQL end to end (Chalice test client, token verification included)", rows)

        # --- federated query -------------------------------------------------------------------
        sql_ours = ("SELECT c.country, count(*) AS orders, count(DISTINCT c.email) AS buyers, sum(o.amount) AS total "
                    "FROM customers_big c JOIN orders_big o ON o.customer_id = c.id GROUP BY 1 ORDER BY 1")

        def bare() -> object:
            con = duckdb.connect(config={"threads": 1})
            con.execute(f"CREATE VIEW customers_big AS SELECT * FROM read_parquet('{files[0]}')")
            con.execute(f"CREATE VIEW orders_big AS SELECT * FROM read_parquet('{files[1]}')")
            out = con.execute(sql_ours).fetchall()
            con.close()
            return out

        result = query.run(principal, sql_ours)
        assert result["row_count"] == 4 and result["rows"][0][0] == "BR", result
        rows = [(measure("POST /v1/query service: 2 x 100k rows, join, mask+hash, lock-down",
                         lambda: query.run(principal, sql_ours), n=3, repeat=3, warmup=1),
                 measure("bare DuckDB: same SQL over the local Parquet files", bare, n=3, repeat=3, warmup=1),
                 "same threads (1)")]
        table("Federated query joining two 100k-row datasets", rows)

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


if __name__ == "__main__":
    main()
