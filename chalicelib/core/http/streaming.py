"""Response bodies sent while they are produced (server-sent events of an answer being generated).

A ``StreamingResponse`` carries an iterator of text chunks instead of a body. Whether it streams depends
on the server in front of the route group:

- a server that can stream (``make run``'s local server, ``infra/local_run.py``) calls ``accepting()``
  around the request; ``to_dict`` then hands the iterator to it (``take()``), and it writes each chunk as
  a chunked-transfer piece as soon as it is produced. When the client goes away, the server closes the
  iterator (``GeneratorExit`` inside the producer), which is how a stopped reader stops the work;
- anything else (Lambda behind API Gateway's proxy integration, Chalice's test client) gets one body:
  ``to_dict`` drains the iterator to its end, the buffered stream of docs/decisions.md.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from chalice import Response  # type: ignore[attr-defined]

_local = threading.local()


class Chunks:
    """The chunks of a streamed body and what ends them: ``close`` closes the producer and runs
    ``on_close`` once, also when the reader left before the first chunk was asked for (a generator
    never started runs no ``finally``)."""

    def __init__(self, chunks: Iterator[str], on_close: Callable[[], None] | None = None) -> None:
        self._chunks, self._on_close, self._closed = chunks, on_close, False

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        return next(self._chunks)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            close = getattr(self._chunks, "close", None)
            if close is not None:
                close()
        finally:
            if self._on_close is not None:
                self._on_close()


class StreamingResponse(Response):  # type: ignore[misc]
    def __init__(self, chunks: Iterator[str], status_code: int = 200,
                 headers: dict[str, str | list[str]] | None = None, on_close: Callable[[], None] | None = None) -> None:
        super().__init__(body="", status_code=status_code, headers=headers or {})
        self.chunks = Chunks(chunks, on_close)

    def to_dict(self, binary_types: Any = None) -> dict[str, Any]:
        if getattr(_local, "accepting", False):
            _local.pending = self.chunks
        else:
            try:
                self.body = "".join(self.chunks)
            finally:
                self.chunks.close()
        return super().to_dict(binary_types)  # type: ignore[no-any-return]


@contextmanager
def accepting() -> Iterator[None]:
    """Around one request on a server that streams: a ``StreamingResponse`` leaves its chunks to ``take``."""
    _local.accepting, _local.pending = True, None
    try:
        yield
    finally:
        _local.accepting = False


def take() -> Chunks | None:
    """The chunks of the response just produced on this thread, when it streams (once)."""
    pending, _local.pending = getattr(_local, "pending", None), None
    return pending  # type: ignore[no-any-return]


def parse_last_event_id(value: str | None) -> int | None:
    """The sequence number of a ``Last-Event-ID`` value, or None when it is not one."""
    if value is None:
        return 0
    value = value.strip()
    if not value.isdigit() or len(value) > 9:
        return None
    return int(value)
