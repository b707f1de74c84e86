"""A part's manifest digest read from its Parquet statistics is the one a scan of its rows gives (the key
range, sources, rows and sum of row hashes) on random parts: keys of any length and script, one or several
sources, nulls. Where a key is longer than the writer's statistics keep, the range may be wider than the
keys' (a bound is all its readers need), never narrower."""
from __future__ import annotations

import os
import random
import tempfile

import duckdb
import pytest

from chalicelib.gateway.snapshots import digests, sql

_SCAN = ("SELECT filename, min(lo), max(hi), list(src), list(n), sum(h) FROM (SELECT filename, "
         "coalesce(_source, '') AS src, min(_key) AS lo, max(_key) AS hi, count(*) AS n, sum(_hash) AS h "
         "FROM read_parquet({files}, filename = true) GROUP BY ALL) GROUP BY filename")


def _key(rng: random.Random, lengths: list[int]) -> str:
    alphabet = "az09\"',[]é漢😀 \\"
    return '["' + "".join(rng.choice(alphabet) for _ in range(rng.choice(lengths))) + '"]'


@pytest.mark.parametrize("seed", range(24))
def test_digests_from_statistics_equal_a_scan_of_the_rows(seed: int) -> None:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        con = duckdb.connect()
        try:
            paths, longest = [], {}
            # the writer cuts a longer statistic, and raises a cut maximum ('d漢漢...' -> 'e'): a bound, not a key
            fixed = [["a", "b" * 300], ["c", "d" + "漢" * 100], ["a" * 300, "c"]]
            for p in range(8 + len(fixed)):
                # half the parts with short strings only (their digests come from the statistics)
                sources = [["s/a.csv"], ["s/a.csv", "s/b.csv"], [None], ["s/" + "x" * 300]][p // 2 % 4 if p % 2 else 0]
                lengths = [1, 5, 20, 60] if p % 2 == 0 else [1, 5, 20, 80, 81, 82, 83, 84, 85, 86, 250, 254, 256, 300]
                rows = [(_key(rng, lengths), rng.choice(sources), rng.getrandbits(64))
                        for _ in range(rng.randint(1, 300))]
                if p >= 8:
                    rows = [(k, "s/a.csv", rng.getrandbits(64)) for k in fixed[p - 8]]
                con.execute("CREATE OR REPLACE TABLE t AS SELECT unnest($1::VARCHAR[]) AS _key, "
                            "unnest($2::VARCHAR[]) AS _source, unnest($3::UBIGINT[]) AS _hash",
                            [list(column) for column in zip(*rows, strict=True)])
                path = os.path.join(tmp, f"part-{p}.parquet")
                con.execute(f"COPY (SELECT * FROM t ORDER BY _source NULLS FIRST, _key) TO '{path}' (FORMAT PARQUET)")
                paths.append(path)
                longest[path] = max(len(k.encode()) for k, _, _ in rows)
            got, by_source = digests.part_digests(con, paths)
            want, want_by_source = {}, {}
            for path, lo, hi, sources, rows, hsum in con.execute(_SCAN.format(files=sql.files_sql(paths))).fetchall():
                want[path] = {"lo": lo, "hi": hi, "sources": sorted(sources), "rows": sum(rows), "hsum": str(hsum)}
                for src, n in zip(sources, rows, strict=True):
                    want_by_source[src] = want_by_source.get(src, 0) + n
        finally:
            con.close()
    assert by_source == want_by_source
    assert got.keys() == want.keys()
    for path, digest in got.items():
        if longest[path] < 250:
            assert digest == want[path]
        else:
            assert {**digest, "lo": "", "hi": ""} == {**want[path], "lo": "", "hi": ""}
            assert digest["lo"] <= want[path]["lo"] and digest["hi"] >= want[path]["hi"]
