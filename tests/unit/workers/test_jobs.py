"""Schedules and queues are declared once (``workers/jobs.py``); ``app.py`` derives exactly one Lambda
handler per declared job, reachable as ``app.<name>`` (the handler string Chalice packages)."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from chalice.app import ScheduledEventConfig, SQSEventConfig

from chalicelib.core.aws import queue_name
from chalicelib.core.config import settings
from chalicelib.workers import jobs

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def workers_app(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setenv("ROUTE_GROUP", "workers")
    settings.cache_clear()
    spec = importlib.util.spec_from_file_location("app", ROOT / "app.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    settings.cache_clear()


def test_one_schedule_per_declared_job(workers_app: ModuleType) -> None:
    schedules = {s.name: s for s in workers_app.app.event_sources if isinstance(s, ScheduledEventConfig)}
    assert set(schedules) == {job.name for job in jobs.SCHEDULED}
    for job in jobs.SCHEDULED:
        expression = schedules[job.name].schedule_expression.to_string()
        amount, unit = expression.removeprefix("rate(").removesuffix(")").split()
        seconds = {"minute": 60, "minutes": 60, "hour": 3600, "hours": 3600, "day": 86400, "days": 86400}[unit]
        assert int(amount) * seconds == job.every_seconds
        assert schedules[job.name].handler_string == f"app.{job.name}"
        assert callable(getattr(workers_app, job.name))


def test_one_consumer_per_declared_queue(workers_app: ModuleType) -> None:
    consumers = {s.name: s for s in workers_app.app.event_sources if isinstance(s, SQSEventConfig)}
    assert set(consumers) == {jobs.handler_name(q) for q in jobs.QUEUE_HANDLERS}
    for queue in jobs.QUEUE_HANDLERS:
        consumer = consumers[jobs.handler_name(queue)]
        assert consumer.queue == queue_name(queue)
        assert consumer.batch_size == 1
        assert consumer.handler_string == f"app.{jobs.handler_name(queue)}"
        assert callable(getattr(workers_app, jobs.handler_name(queue)))


def test_rate_uses_the_largest_whole_unit(workers_app: ModuleType) -> None:
    assert workers_app.rate(30 * 86400).to_string() == "rate(30 days)"
    assert workers_app.rate(3600).to_string() == "rate(1 hour)"
    assert workers_app.rate(300).to_string() == "rate(5 minutes)"
    with pytest.raises(ValueError):
        workers_app.rate(90)
