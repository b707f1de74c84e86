"""The limits benchmark's size parsing, deployed limits and labels (the measurements live in bench/)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import bench_limits as limits


def test_sizes_take_plain_numbers_and_k_and_m_suffixes() -> None:
    assert limits.parse_sizes("100k, 1M,2500") == (100_000, 1_000_000, 2_500)
    assert limits.parse_sizes("1.5M") == (1_500_000,)


@pytest.mark.parametrize("raw", ["", "0", "-5", "abc", "1.5", "10x", ","])
def test_bad_sizes_are_refused(raw: str) -> None:
    with pytest.raises(ValueError):
        limits.parse_sizes(raw)


def test_sizes_come_from_the_environment_or_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BENCH_LIMITS_X", raising=False)
    assert limits.sizes("BENCH_LIMITS_X", "1k,2k") == (1_000, 2_000)
    monkeypatch.setenv("BENCH_LIMITS_X", "3M")
    assert limits.sizes("BENCH_LIMITS_X", "1k,2k") == (3_000_000,)


def test_deployed_limits_are_read_per_group_of_the_stage(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"stages": {
        "gateway-us-east-1-dev": {"environment_variables": {"ROUTE_GROUP": "gateway"}, "lambda_memory_size": 256,
                                  "lambda_timeout": 10},
        "gateway-us-east-1-prod": {"environment_variables": {"ROUTE_GROUP": "gateway"}, "lambda_memory_size": 1024,
                                   "lambda_timeout": 30},
        "workers-us-east-1-prod": {"environment_variables": {"ROUTE_GROUP": "workers"}, "lambda_memory_size": 512,
                                   "lambda_timeout": 300},
    }}))
    fns = limits.deployed(config)
    assert fns == {"gateway": limits.Function("gateway", 1024, 30.0), "workers": limits.Function("workers", 512, 300.0)}


def test_the_projects_config_names_the_groups_the_benchmark_needs() -> None:
    fns = limits.deployed()
    assert {"gateway", "platform", "workers"} <= set(fns)
    assert all(f.memory_mb > 0 and f.timeout_s > 0 for f in fns.values())


def test_within_when_no_limit_is_crossed() -> None:
    assert limits.verdict(memory_mb=512, peak_mib=511.9, seconds=28.9, time_limits=((29, "over 29 s"),),
                          tmp_mib=100) == "within"


def test_every_crossed_limit_is_named_and_the_largest_time_limit_only() -> None:
    label = limits.verdict(memory_mb=512, peak_mib=700, seconds=1000,
                           time_limits=((300, "over the worker's 300 s"), (900, "over 15 min")), tmp_mib=600)
    assert label == "exceeds 512 MB; over 15 min; over 512 MB /tmp"
    assert limits.verdict(memory_mb=1024, peak_mib=100, seconds=30, time_limits=((29, "over 29 s"),)) == "over 29 s"


def test_growth_stops_when_the_projection_passes_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    assert limits.projected_mib(None, 10) is None
    assert limits.projected_mib((100, 1_000.0), 300) == 3_000.0
    monkeypatch.setenv("BENCH_LIMITS_MAX_MIB", "2000")
    assert limits._guard((100, 1_000.0), 150, "x") is None
    row = limits._guard((100, 1_000.0), 300, "the search")
    assert row is not None and "not run" in row and "3,000 MiB" in row
