"""The sandbox cache's bookkeeping: LRU by bytes, too-big sandboxes used once, older snapshots dropped, a
sandbox in use closed only when released. Real in-memory DuckDBs stand in for built sandboxes."""
from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pytest

from chalicelib.gateway.query import cache as query_cache
from chalicelib.gateway.query.cache import Sandbox


@pytest.fixture(autouse=True)
def empty() -> Iterator[None]:
    query_cache.clear()
    yield
    query_cache.clear()


def _builder(nbytes: int, snapshots: dict[str, str | None], built: list[Sandbox]):  # noqa: ANN202
    def build(wanted: dict[str, frozenset[str]]) -> Sandbox:
        box = Sandbox(("ws", *sorted(snapshots.items())), duckdb.connect(), "/nonexistent-gwq", dict(wanted),
                      dict(snapshots), nbytes)
        built.append(box)
        return box
    return build


def _closed(box: Sandbox) -> bool:
    try:
        box.con.execute("SELECT 1")
    except duckdb.Error:
        return True
    return False


def test_a_covered_query_reuses_the_sandbox_and_more_columns_rebuild_with_the_union() -> None:
    built: list[Sandbox] = []
    key = ("ws", ("ds1", "p1"))
    a = query_cache.acquire(key, {"t": frozenset({"x"})}, 1000, _builder(10, {"ds1": "p1"}, built))
    query_cache.release(a)
    b = query_cache.acquire(key, {"t": frozenset({"x"})}, 1000, _builder(10, {"ds1": "p1"}, built))
    assert b is a
    assert len(built) == 1
    query_cache.release(b)
    c = query_cache.acquire(key, {"t": frozenset({"y"})}, 1000, _builder(10, {"ds1": "p1"}, built))
    assert c is not a
    assert c.loaded == {"t": frozenset({"x", "y"})}
    assert _closed(a)
    query_cache.release(c)


def test_lru_by_bytes_and_a_sandbox_above_the_budget_is_used_once() -> None:
    built: list[Sandbox] = []
    boxes = []
    for i in range(3):
        box = query_cache.acquire(("ws", i), {}, 100, _builder(40, {f"ds{i}": "p"}, built))
        query_cache.release(box)
        boxes.append(box)
    assert _closed(boxes[0])
    assert not _closed(boxes[1])
    assert query_cache.held_bytes() == 80
    big = query_cache.acquire(("ws", "big"), {}, 100, _builder(500, {"dsb": "p"}, built))
    assert not _closed(big)  # in use
    query_cache.release(big)
    assert _closed(big)
    assert query_cache.held_bytes() == 80


def test_a_new_snapshot_drops_the_older_one_but_not_while_a_query_uses_it() -> None:
    built: list[Sandbox] = []
    old = query_cache.acquire(("ws", "old"), {}, 1000, _builder(10, {"ds1": "p1", "ds2": "q"}, built))
    new = query_cache.acquire(("ws", "new"), {}, 1000, _builder(10, {"ds1": "p2"}, built))
    assert not _closed(old)  # still running its query
    query_cache.release(old)
    assert _closed(old)
    assert not _closed(new)
    query_cache.release(new)
    assert query_cache.held_bytes() == 10


def test_at_most_max_sandboxes_are_kept_however_small() -> None:
    built: list[Sandbox] = []
    for i in range(query_cache.MAX_SANDBOXES + 3):
        query_cache.release(query_cache.acquire(("ws", i), {}, 10**9, _builder(1, {f"ds{i}": "p"}, built)))
    assert [_closed(b) for b in built[:3]] == [True] * 3
    assert not any(_closed(b) for b in built[3:])
