"""Chat auto-expiry under a controlled clock: the sweep removes exactly the expired chats.

Chats are made through the service (access tokens would expire while the clock moves hours ahead)."""
from __future__ import annotations

import json

import pytest

from chalicelib.chat import service
from chalicelib.chat.models import chats
from chalicelib.core import clock, tenancy
from chalicelib.core.authz import Principal
from chalicelib.core.http.errors import ApiError
from chalicelib.workers import jobs
from tests.functional.chat import helpers
from tests.functional.chat.helpers import ask
from tests.functional.conftest import Tenant, make_tenant


def _set_expiry(workspace_id: str, value: str | None) -> None:
    ws = tenancy.get_workspace(workspace_id)
    settings = json.loads(ws.settings or "{}")
    settings["chat_auto_expiry"] = value
    ws.update(actions=[tenancy.WorkspaceAttrs.settings.set(json.dumps(settings))])


def _principal(t: Tenant) -> Principal:
    return Principal(user_id=t.user_id, workspace_id=t.workspace_id, roles=("admin",), email=t.email,
                     amr=("pwd",), token_id="t")


def _chat(p: Principal, question: str, chat_id: str | None = None) -> str:
    return service.answer(tenancy.scope_of(p), ask(question), None, chat_id).reply["chat_id"]


def test_sweep_removes_exactly_the_expired_chats(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    helpers.use_providers(monkeypatch, None)
    helpers.build(tenant)
    keeper = make_tenant("keeper@example.com", name="Keeps")  # no auto-expiry: kept until deleted
    _set_expiry(tenant.workspace_id, "PT2H")
    p, k = _principal(tenant), _principal(keeper)
    continued = _chat(p, "How is travel booked?")  # t = 0
    clock.advance(3600)
    young = _chat(p, "What about equipment?")  # t = 1 h -> expires at 3 h
    forever = _chat(k, "Anything?")
    clock.advance(1800)
    _chat(p, "Still there?", continued)  # t = 1.5 h: activity moves its expiry to 3.5 h
    fresh = None
    clock.advance(3600)  # t = 2.5 h
    fresh = _chat(p, "Vacation days?")  # expires at 4.5 h
    clock.advance(3600 + 1)  # t = 3.5 h + 1 s: young and continued are past expiry, fresh is not
    with pytest.raises(ApiError) as gone:
        service.get_chat(tenancy.scope_of(p), young)  # expired chats are gone for readers even before the sweep
    assert gone.value.status == 404
    result = jobs.expire_chats({})
    assert result == {"us-east-1": 2, "eu-central-1": 0}
    assert {i.id for i in chats(tenant.region).scan()} == {forever, fresh}
    assert jobs.expire_chats({}) == {"us-east-1": 0, "eu-central-1": 0}


def test_expiry_instant_is_inclusive_and_per_workspace(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    helpers.use_providers(monkeypatch, None)
    helpers.build(tenant)
    _set_expiry(tenant.workspace_id, "PT1H")
    p = _principal(tenant)
    first = _chat(p, "How is travel booked?")
    clock.advance(1800)
    second = _chat(p, "Equipment?")
    stored = {i.id: i.expires_at for i in chats(tenant.region).scan()}
    clock.advance(stored[first] - clock.now())  # exactly first's expiry instant
    assert jobs.expire_chats({})["us-east-1"] == 1
    assert {i.id for i in chats(tenant.region).scan()} == {second}
    assert service.get_chat(tenancy.scope_of(p), second)["id"] == second
