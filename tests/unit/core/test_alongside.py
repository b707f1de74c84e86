"""``aws.alongside``: work on another thread, in a copy of the caller's context, its error the caller's."""
from __future__ import annotations

import threading
from contextvars import ContextVar

import pytest

from chalicelib.core import aws

_seen: ContextVar[str] = ContextVar("seen", default="unset")


def test_the_task_runs_elsewhere_in_the_callers_context_and_cannot_change_it() -> None:
    token = _seen.set("request-1")
    try:
        def task() -> tuple[str, str]:
            before = _seen.get()
            _seen.set("changed by the task")
            return threading.current_thread().name, before

        thread, seen = aws.alongside(task).result(timeout=5)
        assert thread.startswith("alongside")
        assert seen == "request-1"  # the caller's context, copied
        assert _seen.get() == "request-1"  # and the caller's own copy untouched
    finally:
        _seen.reset(token)


def test_an_error_reaches_the_caller_when_it_waits() -> None:
    def fails() -> None:
        raise RuntimeError("throttled")

    with pytest.raises(RuntimeError, match="throttled"):
        aws.alongside(fails).result(timeout=5)
