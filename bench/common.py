"""Benchmark helpers shared by every ``bench/bench_*.py``: fair timing, silence while measuring, tables.

Fairness rules the helpers enforce: a reference is measured in the same run, interleaved with ours
(``measure_pair`` alternates them call by call, and which of the two goes first from pair to pair), with
the same warm-up; medians are printed with their minimum and maximum, never a minimum alone; a p99 is printed only over at
least ``MIN_P99_SAMPLES`` individually timed calls; logging is off while timing (``quiet``); cold
measurements run in fresh interpreters that find no ``.pyc`` (``cold_env``).
"""
from __future__ import annotations

import contextlib
import logging
import os
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

MIN_P99_SAMPLES = 20
BENCH_ENV = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_SESSION_TOKEN": "bench",
             "AWS_DEFAULT_REGION": "us-east-1", "RESOURCE_PREFIX": "aiplat-bench", "LOG_LEVEL": "WARNING",
             # thousands of requests from one token a minute: quotas raised, the limiter's one write still made
             "API_RATE_LIMIT_FACTOR": "1000"}


def use_emulator(**extra: str) -> None:
    """Point this process at moto in process (no endpoint URL, dummy credentials, the bench prefix) before
    any AWS client or setting is made; ``extra`` adds or overrides variables. moto runs as ``make run``'s
    embedded emulator does (``infra.emulator.serialise_writes``): atomic writes, and transactions that cost
    the items they touch, not a copy of every table they name."""
    from infra.emulator import serialise_writes

    serialise_writes()
    for name in [n for n in os.environ if n.startswith("AWS_ENDPOINT_URL")]:
        del os.environ[name]
    # in process there is no queue worker: a chat answer is generated inside its request, the same steps
    os.environ.update({**BENCH_ENV, "CHAT_ANSWERS": "inline", **extra})
    from chalicelib.core.config import settings

    settings.cache_clear()


@dataclass
class Measure:
    name: str
    per_op_us: float  # median microseconds per operation
    p99_us: float  # 99th percentile of single calls (nan when fewer than MIN_P99_SAMPLES were timed)
    ops_per_s: float
    samples: int = 0  # individually timed calls behind p99_us
    min_us: float = float("nan")  # the fastest and slowest sample (a batch's per-op time, or one call)
    max_us: float = float("nan")


class AwsCalls:
    """Counts the AWS calls made through botocore (boto3 and PynamoDB alike) while installed, of one service
    or all, and the time spent inside them (with an in-process emulator: the emulator's work)."""

    def __init__(self, service: str | None = None) -> None:
        from botocore.client import BaseClient  # noqa: PLC0415

        self.seen: Counter[str] = Counter()
        self.seconds = 0.0
        self._base, self._real = BaseClient, BaseClient._make_api_call
        calls = self

        def counting(client: Any, operation: str, params: dict[str, Any]) -> Any:
            if service is not None and client.meta.service_model.service_name != service:
                return calls._real(client, operation, params)
            calls.seen[operation] += 1
            t0 = time.perf_counter()
            try:
                return calls._real(client, operation, params)
            finally:
                calls.seconds += time.perf_counter() - t0

        BaseClient._make_api_call = counting  # type: ignore[method-assign]

    def reset(self) -> None:
        self.seen.clear()
        self.seconds = 0.0

    def of(self, fn: Callable[[], object]) -> str:
        """The calls ``fn`` makes, by operation."""
        self.reset()
        fn()
        return ", ".join(f"{k} {v}" for k, v in sorted(self.seen.items())) or "none"

    def close(self) -> None:
        self._base._make_api_call = self._real  # type: ignore[method-assign]


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """No log record is formatted or written inside the block (access log, structured logs, libraries)."""
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(previous)


def percentile(samples: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``samples`` by nearest rank; nan below ``MIN_P99_SAMPLES`` samples."""
    if len(samples) < MIN_P99_SAMPLES:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered))) - 1))]


def measure(name: str, fn: Callable[[], object], *, n: int = 200, repeat: int = 5, warmup: int = 20) -> Measure:
    """Median of ``repeat`` batches of ``n`` calls (per-op time); p99 over the first batch's single calls."""
    with quiet():
        for _ in range(warmup):
            fn()
        batches = []
        singles: list[float] = []
        for r in range(repeat):
            start = time.perf_counter()
            for _ in range(n):
                if r == 0:
                    t0 = time.perf_counter()
                    fn()
                    singles.append(time.perf_counter() - t0)
                else:
                    fn()
            batches.append((time.perf_counter() - start) / n)
    per = statistics.median(batches)
    return Measure(name, per * 1e6, percentile(singles, 0.99) * 1e6, 1 / per if per else float("inf"), len(singles),
                   min(batches) * 1e6, max(batches) * 1e6)


def measure_pair(name: str, fn: Callable[[], object], ref_name: str, ref: Callable[[], object], *, n: int = 200,
                 repeat: int = 7, warmup: int = 20) -> tuple[Measure, Measure]:
    """Measure ``fn`` and its reference interleaved call by call (``n * repeat`` calls each; the reference
    goes first in even pairs, ours in odd ones), so machine noise and cache state (what the first call
    of a pair leaves warm for the second) hit both alike; medians, min, max and p99 of single calls."""
    ours: list[float] = []
    theirs: list[float] = []
    clock = time.perf_counter
    with quiet():
        for i in range(warmup):
            if i % 2:
                fn()
                ref()
            else:
                ref()
                fn()
        for i in range(n * repeat):
            if i % 2:
                t0 = clock()
                fn()
                t1 = clock()
                ref()
                t2 = clock()
                ours.append(t1 - t0)
                theirs.append(t2 - t1)
            else:
                t0 = clock()
                ref()
                t1 = clock()
                fn()
                t2 = clock()
                theirs.append(t1 - t0)
                ours.append(t2 - t1)

    def to_measure(label: str, samples: list[float]) -> Measure:
        per = statistics.median(samples)
        return Measure(label, per * 1e6, percentile(samples, 0.99) * 1e6, 1 / per if per else float("inf"),
                       len(samples), min(samples) * 1e6, max(samples) * 1e6)

    return to_measure(name, ours), to_measure(ref_name, theirs)


def cold_env(**extra: str) -> dict[str, str]:
    """Environment for a fresh interpreter that finds no ``.pyc``: bytecode is neither written nor read from
    ``__pycache__`` (``PYTHONPYCACHEPREFIX`` points at a new empty directory), as in a package without it."""
    empty = tempfile.mkdtemp(prefix="bench-nopyc-")
    return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": empty, **extra}


def _us(value: float) -> str:
    return "n/a" if value != value else f"{value:.1f}"  # nan: too few samples for a p99


def _span(m: Measure) -> str:
    return f"{_us(m.min_us)}-{_us_any(m.max_us)}"


def _us_any(value: float) -> str:
    return "n/a" if value != value else f"{value:.1f}"


def table(title: str, rows: list[tuple[Measure, Measure | None, str]]) -> str:
    """Rows of (measured, reference or None, target note); prints and returns the markdown."""
    lines = [f"### {title}", "", "| operation | median µs/op | min-max µs | p99 µs | ops/s | reference | ref µs/op "
             "| ref min-max µs | ref p99 µs | ratio | target |", "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|"]
    for m, ref, target in rows:
        if ref is not None:
            ratio = m.per_op_us / ref.per_op_us if ref.per_op_us else float("nan")
            lines.append(f"| {m.name} | {m.per_op_us:.1f} | {_span(m)} | {_us(m.p99_us)} | {m.ops_per_s:,.0f} | "
                         f"{ref.name} | {ref.per_op_us:.1f} | {_span(ref)} | {_us(ref.p99_us)} | {ratio:.2f}x | "
                         f"{target} |")
        else:
            lines.append(f"| {m.name} | {m.per_op_us:.1f} | {_span(m)} | {_us(m.p99_us)} | {m.ops_per_s:,.0f} "
                         f"| | | | | | {target} |")
    out = "\n".join(lines) + "\n"
    print(out, flush=True)
    return out


QUIET_STATES = (("steady", 0.0), ("after 5 s of quiet", 5.0), ("after 60 s of quiet", 60.0))


def after_quiet(title: str, name: str, request: Callable[[], object], ref_name: str, ref: Callable[[], object],
                *, n: int = 12, uncounted: tuple[str, ...] = ()) -> list[str]:
    """``request`` in three states (steady, then after 5 s and after 60 s of quiet: the process clock,
    ``chalicelib.core.clock``, moved on before each sample rather than slept), its AWS calls counted (less
    those starting with one of ``uncounted``: the harness's own), beside ``ref`` measured right after each
    sample in the same run. Markdown lines: median [min-max] per state."""
    from chalicelib.core import clock
    from tests.functional.aws_calls import counting

    def span(values: list[float], fmt: str) -> str:
        return f"{statistics.median(values):{fmt}} [{min(values):{fmt}}-{max(values):{fmt}}]"

    lines = [f"### {title}\n", f"| state | {name}: ms | AWS calls | reference: {ref_name}: ms | ratio |",
             "|---|---:|---:|---:|---:|"]
    request()
    for label, quiet in QUIET_STATES:
        ms: list[float] = []
        calls: list[float] = []
        ref_ms: list[float] = []
        for _ in range(n):
            clock.advance(quiet)
            with counting() as seen:
                t0 = time.perf_counter()
                request()
                ms.append((time.perf_counter() - t0) * 1000)
            calls.append(float(sum(v for k, v in seen.items() if not k.startswith(uncounted))))
            t0 = time.perf_counter()
            ref()
            ref_ms.append((time.perf_counter() - t0) * 1000)
        lines.append(f"| {label} | {span(ms, '.1f')} | {span(calls, '.0f')} | {span(ref_ms, '.1f')} | "
                     f"{statistics.median(ms) / statistics.median(ref_ms):.2f}x |")
    return lines + [""]
