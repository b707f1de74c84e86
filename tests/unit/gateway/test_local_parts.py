"""A container's local copies of snapshot files: kept by key, read back through links, bounded by bytes
(least recently used first) and by idle time, dropped when their objects are deleted."""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from chalicelib.core import clock
from chalicelib.gateway import local_parts


@pytest.fixture(autouse=True)
def empty() -> Iterator[None]:
    local_parts.clear()
    clock.reset()
    yield
    local_parts.clear()
    clock.reset()


def _file(tmp: Path, name: str, size: int, fill: bytes = b"x") -> str:
    path = tmp / name
    path.write_bytes(fill * size)
    return str(path)


def test_a_kept_file_is_read_back_by_region_and_key(tmp_path: Path) -> None:
    src = _file(tmp_path, "a", 10, b"a")
    local_parts.keep("us-east-1", "k/a.parquet", src)
    assert os.path.exists(src)  # linked: the caller still reads it
    dest = str(tmp_path / "dest")
    assert local_parts.copy_to("us-east-1", "k/a.parquet", dest)
    assert Path(dest).read_bytes() == b"a" * 10
    assert not local_parts.copy_to("eu-west-1", "k/a.parquet", str(tmp_path / "other"))
    assert not local_parts.copy_to("us-east-1", "k/b.parquet", str(tmp_path / "other"))


def test_a_moved_file_leaves_its_path_and_a_refused_one_is_removed_too(tmp_path: Path, monkeypatch) -> None:
    src = _file(tmp_path, "m", 10)
    local_parts.keep("us-east-1", "k/m", src, move=True)
    assert not os.path.exists(src)
    assert local_parts.copy_to("us-east-1", "k/m", str(tmp_path / "back"))
    monkeypatch.setattr(local_parts, "BUDGET_BYTES", 5)
    big = _file(tmp_path, "big", 10)
    local_parts.keep("us-east-1", "k/big", big, move=True)  # larger than the budget: not kept, still gone
    assert not os.path.exists(big)
    assert ("us-east-1", "k/big") not in local_parts.held()


def test_removing_a_reader_link_or_the_copy_leaves_the_other(tmp_path: Path) -> None:
    local_parts.keep("us-east-1", "k", _file(tmp_path, "a", 4, b"a"), move=True)
    dest = str(tmp_path / "d")
    assert local_parts.copy_to("us-east-1", "k", dest)
    os.remove(dest)  # a sync's work directory goes
    assert local_parts.copy_to("us-east-1", "k", dest)
    local_parts.forget("us-east-1", ["k"])
    assert Path(dest).read_bytes() == b"aaaa"  # a reader's link outlives the copy's removal
    assert not local_parts.copy_to("us-east-1", "k", str(tmp_path / "e"))


def test_the_budget_drops_the_least_recently_used(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(local_parts, "BUDGET_BYTES", 25)
    for name in "abc":
        local_parts.keep("r", name, _file(tmp_path, name, 10), move=True)
    assert set(k for _, k in local_parts.held()) == {"b", "c"}
    assert local_parts.copy_to("r", "b", str(tmp_path / "use-b"))  # b is now the most recent
    local_parts.keep("r", "d", _file(tmp_path, "d", 10), move=True)
    held = local_parts.held()
    assert set(k for _, k in held) == {"b", "d"}
    assert len(os.listdir(os.path.dirname(next(iter(held.values()))))) == 2  # the dropped files are gone


def test_a_copy_unused_for_the_idle_bound_goes(tmp_path: Path) -> None:
    with clock.frozen():
        local_parts.keep("r", "a", _file(tmp_path, "a", 3), move=True)
        local_parts.keep("r", "b", _file(tmp_path, "b", 3), move=True)
        clock.advance(local_parts.IDLE_SECONDS - 1)
        assert local_parts.copy_to("r", "a", str(tmp_path / "a1"))  # used: its idle time starts again
        clock.advance(2)
        assert local_parts.copy_to("r", "a", str(tmp_path / "a2"))
        assert set(k for _, k in local_parts.held()) == {"a"}  # "b" went unused for the bound
        clock.advance(local_parts.IDLE_SECONDS)
        assert not local_parts.copy_to("r", "a", str(tmp_path / "a3"))
        assert local_parts.held() == {}


def test_keeping_a_key_again_replaces_its_copy(tmp_path: Path) -> None:
    local_parts.keep("r", "k", _file(tmp_path, "one", 3, b"1"), move=True)
    local_parts.keep("r", "k", _file(tmp_path, "two", 3, b"2"), move=True)
    assert len(local_parts.held()) == 1
    assert local_parts.copy_to("r", "k", str(tmp_path / "out"))
    assert Path(tmp_path / "out").read_bytes() == b"222"
    assert len(os.listdir(os.path.dirname(local_parts.held()[("r", "k")]))) == 1
