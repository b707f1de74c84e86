"""Pure helpers of the platform area: cursors, slugs, audit filters."""
from __future__ import annotations

import pytest

from chalicelib.core.http import paging
from chalicelib.core.http.errors import ApiError
from chalicelib.platform.audit.query import parse_filters
from chalicelib.platform.workspaces.service import default_replication, slugify


def test_cursor_round_trip_and_refusals() -> None:
    c = paging.encode("members", "usr_01ABC")
    assert paging.decode("members", c) == "usr_01ABC"
    assert paging.decode("members", None) is None
    assert paging.decode("members", "") is None  # ?after= with an unset cursor: the first page
    assert paging.decode("audit", paging.encode("audit", 42), int) == 42
    refused = [("members", str, x) for x in ("!!!", "bm9wZQ", "x" * 600, paging.encode("invitations", "inv_1"),
                                             paging.encode("members", 5))]
    refused += [("audit", int, paging.encode("audit", "12")), ("audit", int, paging.encode("audit", True))]
    for kind, typ, bad in refused:
        with pytest.raises(ApiError) as err:
            paging.decode(kind, bad, typ)
        assert err.value.status == 400, bad


def test_slug_rule() -> None:
    assert slugify("Zürich Research") == "zurich-research"
    assert slugify("  ACME, Inc.  ") == "acme-inc"
    assert slugify("日本") == "workspace"
    assert len(slugify("x" * 100)) == 40
    assert default_replication("eu-central") == "none"
    assert default_replication("us-east") == "in-region-multi-az"


def test_audit_filters() -> None:
    f = parse_filters({"from": "2026-01-01T00:00:00Z", "action": "member.*", "actor": "usr_1"})
    assert f.from_iso == "2026-01-01T00:00:00.000Z"
    assert f.action == "member.*"
    assert parse_filters({"from": "2026-01-01T10:00:00+00:00"}).from_iso == "2026-01-01T10:00:00.000Z"
    assert parse_filters({"from": "2026-01-01T10:00:00+02:00"}).from_iso == "2026-01-01T08:00:00.000Z"  # RFC 3339 offset
    assert parse_filters({"to": "9999-12-31T23:59:59-23:59"}).to_iso == "9999-12-31T23:59:59.999Z"  # past the calendar
    for bad in ({"from": "2026-01-01T00:00:00"}, {"from": "2026-01-01"}, {"action": "a b"},
                {"actor": 'x"y'}, {"unknown": "1"}, {"from": "2026-02-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"}):
        with pytest.raises(ApiError) as err:
            parse_filters(bad)
        assert err.value.status == 400
