"""What the answering code needs of the worker: its run state and its step runner (``worker.py``)."""
from __future__ import annotations

from typing import Any, Protocol


class Steps(Protocol):
    def run(self, name: str, tool: str, raw_input: Any, *, render: bool = True,
            refuse: dict[str, str] | None = None) -> Any: ...


class StateLike(Protocol):
    agent: dict[str, Any]
    run_input: dict[str, Any]
    steps_done: list[dict[str, Any]]
    usage: dict[str, int]
    ctx: Any
