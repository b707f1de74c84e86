"""Pure logic: validation, timestamps, ids, slugs, residency answers, permission map."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chalicelib.core import clock
from chalicelib.core.authz import PERMISSIONS, Principal, Role
from chalicelib.core.http.errors import ApiError
from chalicelib.core.http.validation import F, email, validate
from chalicelib.core.ids import is_id, new_id
from chalicelib.core.regions import region_for
from chalicelib.platform.workspaces.service import slugify

SPEC = {"name": F(str, required=True, min_len=1, max_len=10), "mfa": F(bool), "role": F(str, enum=("admin", "member")),
        "n": F(int, minimum=1, maximum=5), "email": F(str, check=email)}


def test_valid_body_passes() -> None:
    assert validate({"name": "a", "mfa": True, "n": 3}, SPEC)["n"] == 3


@pytest.mark.parametrize("body,field", [
    ({}, "name"), ({"name": ""}, "name"), ({"name": "x" * 11}, "name"), ({"name": 1}, "name"),
    ({"name": "a", "mfa": "yes"}, "mfa"), ({"name": "a", "role": "owner"}, "role"), ({"name": "a", "n": True}, "n"),
    ({"name": "a", "n": 9}, "n"), ({"name": "a", "email": "not-an-email"}, "email"), ({"name": "a", "extra": 1}, "extra"),
    ({"name": None}, "name"),
])
def test_invalid_bodies_name_the_field(body: dict, field: str) -> None:
    with pytest.raises(ApiError) as err:
        validate(body, SPEC)
    assert err.value.status == 400
    assert field in {e["field"] for e in err.value.errors or []}


def test_non_object_body_refused() -> None:
    with pytest.raises(ApiError):
        validate([1, 2], SPEC)


@pytest.mark.parametrize("value", ["2026-01-01T00:00:00Z", "2026-01-01T00:00:00.123Z", "2026-01-01T00:00:00+00:00"])
def test_parse_iso_accepts_utc(value: str) -> None:
    assert clock.parse_iso(value).year == 2026


@pytest.mark.parametrize("value", ["2026-01-01", "2026-01-01T00:00:00", "2026-01-01T00:00:00+02:00", "yesterday", ""])
def test_parse_iso_refuses_non_utc_or_garbage(value: str) -> None:
    with pytest.raises(ValueError):
        clock.parse_iso(value)


def test_iso_format_is_utc_z() -> None:
    assert clock.iso(0) == "1970-01-01T00:00:00.000Z"


def test_ids_are_prefixed_sortable_and_checked() -> None:
    a, b = new_id("ws"), new_id("ws")
    assert is_id(a, "ws")
    assert not is_id(a, "usr")
    assert not is_id("ws_123", "ws")
    assert not is_id(None, "ws")
    assert a != b
    with pytest.raises(ValueError):
        new_id("nope")


@pytest.mark.parametrize("name,slug", [("Acme Corp", "acme-corp"), ("  Ünïcödé Team!! ", "unicode-team"), ("Straße ø", "strae"),
                                       ("***", "workspace"), ("a" * 60, "a" * 40)])
def test_slug_rule(name: str, slug: str) -> None:
    assert slugify(name) == slug


@given(st.text(max_size=80))
def test_slug_is_always_url_safe(name: str) -> None:
    s = slugify(name)
    assert 1 <= len(s) <= 40
    assert all(c.isalnum() and c.isascii() or c == "-" for c in s)
    assert not s.startswith("-")
    assert not s.endswith("-")


def test_residency_answers() -> None:
    assert region_for("eu-central") == "eu-central-1"
    assert region_for("us-east") == "us-east-1"
    with pytest.raises(ApiError) as planned:
        region_for("br-south")
    assert planned.value.status == 422
    assert planned.value.extra["alternatives"] == ["us-east", "eu-central"]
    with pytest.raises(ApiError) as unknown:
        region_for("mars")
    assert unknown.value.status == 400


def _p(role: str) -> Principal:
    return Principal("usr_1", "ws_1", (role,), "a@b.c", (), "tok_1")


def test_permission_map_matches_spec_roles() -> None:
    admin, member, viewer = _p("admin"), _p("member"), _p("viewer")
    assert all(admin.can(p) for p in PERMISSIONS)  # Admin: everything
    assert member.can("chat.use")
    assert member.can("agents.run")
    assert member.can("knowledge.read")
    assert not member.can("audit.read")
    assert not member.can("members.manage")
    assert not member.can("billing.manage")
    assert viewer.can("audit.read")
    assert viewer.can("dashboards.read")
    assert not viewer.can("chat.use")
    assert not viewer.can("knowledge.read")
    assert not viewer.can("audit.export")
    assert not admin.can("no.such.permission")  # deny by default
    assert not _p("owner").can("workspace.read")
    assert {r.value for r in Role} == {"admin", "member", "viewer"}
