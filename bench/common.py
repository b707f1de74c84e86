"""Benchmark helpers: time a callable, print a markdown table with a same-run reference beside it."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Measure:
    name: str
    per_op_us: float  # median microseconds per operation
    p99_us: float
    ops_per_s: float


def measure(name: str, fn: Callable[[], object], *, n: int = 200, repeat: int = 5, warmup: int = 20) -> Measure:
    """Median of ``repeat`` batches of ``n`` calls (per-op time); p99 over individual calls of one batch."""
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
    singles.sort()
    p99 = singles[min(len(singles) - 1, int(len(singles) * 0.99))]
    return Measure(name, per * 1e6, p99 * 1e6, 1 / per if per else float("inf"))


def measure_pair(name: str, fn: Callable[[], object], ref_name: str, ref: Callable[[], object], *, n: int = 200,
                 repeat: int = 7, warmup: int = 20) -> tuple[Measure, Measure]:
    """Measure ``fn`` and its reference in alternating batches, so machine noise hits both alike."""
    for _ in range(warmup):
        fn()
        ref()
    ours: list[float] = []
    theirs: list[float] = []
    for _ in range(repeat):
        for out, f in ((theirs, ref), (ours, fn)):
            start = time.perf_counter()
            for _ in range(n):
                f()
            out.append((time.perf_counter() - start) / n)

    def to_measure(label: str, batches: list[float]) -> Measure:
        per = statistics.median(batches)
        return Measure(label, per * 1e6, max(batches) * 1e6, 1 / per if per else float("inf"))

    return to_measure(name, ours), to_measure(ref_name, theirs)


def table(title: str, rows: list[tuple[Measure, Measure | None, str]]) -> str:
    """Rows of (measured, reference or None, target note); prints and returns the markdown."""
    lines = [f"### {title}", "", "| operation | median µs/op | p99 µs (worst batch for pairs) | ops/s | reference | ref µs/op | ratio | target |",
             "|---|---:|---:|---:|---|---:|---:|---|"]
    for m, ref, target in rows:
        if ref is not None:
            ratio = m.per_op_us / ref.per_op_us if ref.per_op_us else float("nan")
            lines.append(f"| {m.name} | {m.per_op_us:.1f} | {m.p99_us:.1f} | {m.ops_per_s:,.0f} | {ref.name} | "
                         f"{ref.per_op_us:.1f} | {ratio:.2f}x | {target} |")
        else:
            lines.append(f"| {m.name} | {m.per_op_us:.1f} | {m.p99_us:.1f} | {m.ops_per_s:,.0f} | | | | {target} |")
    out = "\n".join(lines) + "\n"
    print(out, flush=True)
    return out
