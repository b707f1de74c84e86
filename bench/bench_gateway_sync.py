"""Sync throughput (rows per second) of an ``s3`` CSV connector against in-process moto: a full sync of
100k rows in 100 objects, then an incremental sync after 1% of the rows changed (one object rewritten);
beside DuckDB reading the same CSV and writing Parquet directly (no S3, no normalisation, no merge)."""
from __future__ import annotations

import os
import tempfile
import time

N_OBJECTS = 100
ROWS_PER_OBJECT = 1000


def _env() -> None:
    for name in [n for n in os.environ if n.startswith("AWS_ENDPOINT_URL")]:
        del os.environ[name]
    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
                       "RESOURCE_PREFIX": "aiplat-bench"})


def _csv(obj: int, version: int = 0) -> str:
    lines = ["id,email,amount,score,created_at,note"]
    base = obj * ROWS_PER_OBJECT
    for i in range(base, base + ROWS_PER_OBJECT):
        lines.append(f"{i},user{i}@example.com,{i % 997 + version},{(i % 100) / 7:.4f},"
                     f"2024-{i % 12 + 1:02d}-{i % 28 + 1:02d}T10:00:00Z,note {i % 13}")
    return "\n".join(lines) + "\n"


def _best(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    _env()
    from moto import mock_aws

    from chalicelib.core import aws
    from chalicelib.core.authz import Principal
    from chalicelib.core.config import settings
    from chalicelib.gateway import connectors, sync, sync_worker
    from chalicelib.identity import signing, users
    from chalicelib.platform.workspaces import create_workspace
    from infra.bootstrap import bootstrap_global, bootstrap_region

    settings.cache_clear()
    aws.reset_caches()
    with mock_aws():
        region = "us-east-1"
        bootstrap_global()
        bootstrap_region(region)
        signing.ensure_key()
        user = users.create_user("bench@example.com", email_verified=True)
        ws = create_workspace(owner_id=user.id, owner_email=user.email, name="Bench", residency="us-east",
                              enforce_mfa=False)
        principal = Principal(user.id, ws.id, ("admin",), user.email, ("pwd",), "bench")
        import boto3  # noqa: PLC0415

        # the source lives in the workspace's own account, read through the role it grants
        creds = aws.client("sts", region).assume_role(RoleArn="arn:aws:iam::111122223333:role/owner",
                                                      RoleSessionName="bench")["Credentials"]
        s3 = boto3.client("s3", region_name=region, aws_access_key_id=creds["AccessKeyId"],
                          aws_secret_access_key=creds["SecretAccessKey"], aws_session_token=creds["SessionToken"])
        s3.create_bucket(Bucket="bench-source")
        bodies = [_csv(o) for o in range(N_OBJECTS)]
        for o, body in enumerate(bodies):
            s3.put_object(Bucket="bench-source", Key=f"rows/{o:03d}.csv", Body=body.encode())
        conn = connectors.create_connector(principal, {"name": "Bench rows", "kind": "s3", "config": {
            "role_arn": "arn:aws:iam::111122223333:role/bench-reader", "bucket": "bench-source", "prefix": "rows/", "primary_key": ["id"]}}, None)
        total = N_OBJECTS * ROWS_PER_OBJECT

        def one_sync(mode: str) -> dict:
            run = sync.request_sync(principal, conn["id"], mode=mode)
            out = sync_worker.run_sync(ws.id, run["id"])
            assert out.status == "done", out
            return sync.get_sync_run(principal, run["id"])

        full_s = _best(lambda: one_sync("FULL_REFRESH"))
        version = [0]

        def incremental() -> None:
            version[0] += 1
            s3.put_object(Bucket="bench-source", Key="rows/050.csv", Body=_csv(50, version[0]).encode())
            run = one_sync("INCREMENTAL")
            assert run["rows_read"] == ROWS_PER_OBJECT, run

        incr_s = _best(incremental)
        noop_s = _best(lambda: one_sync("INCREMENTAL"))

    import duckdb

    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "all.csv")
        with open(src, "w") as fh:
            fh.write(bodies[0])
            for body in bodies[1:]:
                fh.write(body.split("\n", 1)[1])
        out = os.path.join(tmp, "out.parquet")

        def reference() -> None:
            con = duckdb.connect()
            con.execute(f"COPY (SELECT * FROM read_csv('{src}')) TO '{out}' (FORMAT PARQUET, COMPRESSION ZSTD)")
            con.close()

        ref_s = _best(reference)

    rows = [
        ("full sync, 100k rows / 100 objects (FULL_REFRESH)", total, full_s),
        ("incremental sync, 1% changed (1 object, 1k rows read; 100k-row snapshot rewritten)", ROWS_PER_OBJECT, incr_s),
        ("incremental sync, nothing changed", 0, noop_s),
        ("reference: duckdb read_csv -> Parquet, same 100k rows, local file", total, ref_s),
    ]
    lines = ["### Gateway sync throughput (s3 CSV connector, in-process moto)", "",
             "| operation | rows | seconds (best of 3) | rows/s | vs reference |", "|---|---:|---:|---:|---:|"]
    for name, n, secs in rows:
        rate = n / secs if n else 0
        lines.append(f"| {name} | {n:,} | {secs:.3f} | {rate:,.0f} | {secs / ref_s:.1f}x time |")
    print("\n".join(lines) + "\n", flush=True)


if __name__ == "__main__":
    main()
