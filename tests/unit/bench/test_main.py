"""`make bench` runs exactly the benchmark modules in ``bench/``, each once."""
from __future__ import annotations

from pathlib import Path

from bench.__main__ import MODULES, document

BENCH = Path(__file__).resolve().parents[3] / "bench"


def test_every_bench_module_is_registered_once() -> None:
    on_disk = sorted(p.stem for p in BENCH.glob("bench_*.py"))
    assert sorted(MODULES) == on_disk
    assert len(set(MODULES)) == len(MODULES)


def test_document_names_its_run() -> None:
    text = document("- date: d\n- commit: c", ["## bench_x\n\nintro\n\ntable\n"])
    assert text.startswith("# Benchmarks\n")
    assert "- commit: c" in text
    assert "## bench_x" in text
