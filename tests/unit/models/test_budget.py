"""The monthly token budget's arithmetic and what an answer spends (no AWS: the counter is a seam)."""
from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from typing import Any

import pytest

from chalicelib.llm import budget, service
from chalicelib.llm.prompt import Completion, Prompt
from chalicelib.llm.registry import ModelSpec
from chalicelib.llm.routing import Routing

SPEC = ModelSpec(id="p/m", provider="p", provider_kind="openai", model="m", name="m", kind="generative",
                 context_tokens=8192, streaming=True, tool_use=False, embeddings=False, regions=("us-east-1",))


class _Model:
    def complete(self, spec: ModelSpec, region: str, prompt: Prompt) -> Completion:
        return Completion("Thirty days.", 40, 5)

    def stream(self, spec: ModelSpec, region: str, prompt: Prompt) -> Iterator[str | Completion]:
        yield "Thirty "
        yield "days."
        yield Completion("Thirty days.", 40, 5)


@pytest.fixture
def spent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    monkeypatch.setattr(budget, "count", lambda ws, tokens: out.append((ws, tokens)))
    monkeypatch.setattr(service, "_module", lambda spec: _Model())
    return out


def _prompt() -> Prompt:
    return Prompt([{"role": "user", "content": "How many vacation days?"}], max_tokens=50)


def test_every_answer_spends_its_tokens_a_stopped_stream_what_was_generated(spent: list[Any]) -> None:
    chosen = Routing(SPEC, "us-east-1", "test", workspace_id="ws_1")
    service.complete(chosen, _prompt())
    assert list(service.stream(chosen, _prompt()))[-1].output_tokens == 5
    assert spent == [("ws_1", 45), ("ws_1", 45)]
    parts = service.stream(chosen, _prompt())
    assert next(parts) == "Thirty "
    parts.close()  # the reader went away
    assert len(spent) == 3 and spent[-1][0] == "ws_1" and spent[-1][1] > 0
    service.complete(Routing(SPEC, "us-east-1", "no workspace"), _prompt())  # nobody's budget
    assert len(spent) == 3


@pytest.mark.parametrize("now,key,window,left", [
    (dt.datetime(2026, 2, 27, 0, 0, 0, tzinfo=dt.UTC), "month#2026-02", 28 * 86400, 2 * 86400),
    (dt.datetime(2026, 12, 31, 23, 59, 30, tzinfo=dt.UTC), "month#2026-12", 31 * 86400, 30),
    (dt.datetime(2028, 2, 1, 0, 0, 0, tzinfo=dt.UTC), "month#2028-02", 29 * 86400, 29 * 86400),
])
def test_the_month_window_and_reset(now: dt.datetime, key: str, window: int, left: int) -> None:
    assert budget._month(now) == (key, window, left)


def test_the_rate_limit_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "_month", lambda now=None: ("month#2026-11", 30 * 86400, 3600))
    h = budget.headers(1000, 1200)
    assert h == {"Retry-After": "3600", "RateLimit-Policy": '"monthly-tokens";q=1000;qu="tokens";w=2592000',
                 "RateLimit": '"monthly-tokens";r=0;t=3600'}
    assert re.fullmatch(r'"monthly-tokens";r=250;t=3600', budget.headers(1000, 750)["RateLimit"])
