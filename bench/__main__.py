"""`make bench`: runs every registered benchmark module's ``main()``, each in a process of its own, and writes
``docs/benchmarks.md``.

The document is written from this one run only (machine, date and commit at the top), so its figures
cannot contradict each other. ``python -m bench NAME...`` runs the modules whose names contain one of the
given words and only prints (the document is rewritten by a full run); ``python -m bench --update NAME...``
also puts those sections into the document in place of their last run's, each stamped with the date, commit
and load of its own run (its figures still sit beside references measured in that same run).

Adding a benchmark: write ``bench/bench_<area>.py`` with a docstring (its first paragraph introduces the
section) and a ``main()`` that prints markdown, then add its name to ``MODULES``.
"""
from __future__ import annotations

import ast
import importlib
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "benchmarks.md"

# The benchmark modules, in the order they run and appear in the document.
MODULES: tuple[str, ...] = (
    "bench_tokens",
    "bench_signin",
    "bench_passkeys_sso",
    "bench_platform",
    "bench_scim",
    "bench_catalog",
    "bench_packaging",
    "bench_audit",
    "bench_gateway_sync",
    "bench_gateway_query",
    "bench_regions",
    "bench_chat",
    "bench_grounding",
    "bench_models",
    "bench_reader",
    "bench_protocols",
    "bench_webapp",
    "bench_uploads",
    "bench_agents",
    "bench_residency",
    "bench_local_state",
    "bench_limits",
    "bench_telemetry",
)


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_header() -> str:
    """Date, commit and machine of this run."""
    commit = _git("rev-parse", "--short", "HEAD")
    dirty = " (with uncommitted changes)" if _git("status", "--porcelain", "--untracked-files=no") else ""
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "unknown"
    return "\n".join([
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- commit: {commit}{dirty}",
        f"- machine: {os.cpu_count()} CPUs visible ({_cpu_model()}), {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}",
        f"- load average at start (1, 5, 15 min): {load}",
        "- AWS: emulated in process by moto, set up as `make run`'s emulator (`infra/emulator`: atomic writes, "
        "transactions costing the items they touch); every DynamoDB/KMS/S3 call costs CPU here, whereas on AWS it is a "
        "network wait; storage-bound figures are pessimistic, and the same-run reference beside each figure "
        "is what to compare against",
    ])


def _intro(name: str) -> str:
    """The first paragraph of the module's docstring (read, not imported: the module runs in its own process)."""
    doc = ast.get_docstring(ast.parse((ROOT / "bench" / f"{name}.py").read_text())) or ""
    return doc.split("\n\n", 1)[0].replace("\n", " ")


def _fresh_process_state() -> None:
    """No cache, signer, client or setting left from the process's start (a benchmark runs against its own
    emulator, so a key or item cached before it would be stale)."""
    from chalicelib.core import process_state
    from chalicelib.core.config import settings

    settings.cache_clear()
    process_state.reset_all(derived=True)


def run_one(name: str) -> None:
    """Run one benchmark module's ``main()`` in this process (``python -m bench --one NAME``)."""
    module = importlib.import_module(f"bench.{name}")
    _fresh_process_state()
    module.main()


def run_module(name: str) -> str:
    """Run one benchmark module in a process of its own, as a new container would: no heap, cache, setting
    or emulator state left by the modules before it; returns its section of the document."""
    print(f"## {name}\n", flush=True)
    started = time.monotonic()
    child = subprocess.Popen([sys.executable, "-m", "bench", "--one", name], cwd=ROOT, stdout=subprocess.PIPE,
                             text=True)
    out = []
    assert child.stdout is not None
    for line in child.stdout:  # shown as it comes, and kept for the document
        sys.stdout.write(line)
        sys.stdout.flush()
        out.append(line)
    outcome = "" if child.wait() == 0 else f"\n\n**This benchmark failed in this run** (exit status {child.returncode})."
    took = time.monotonic() - started
    return f"## {name}\n\n{_intro(name)}\n\n{''.join(out).strip()}{outcome}\n\n({took:.0f} s)\n"


def document(header: str, sections: list[str]) -> str:
    return ("# Benchmarks\n\nWritten by `make bench` (`bench/__main__.py`) from one run; do not edit by hand. "
            "Each figure sits beside a reference measured in the same run; compare ratios, not absolute "
            "figures. A section refreshed alone (`python -m bench --update NAME`) says so and carries its own "
            "run's date, commit and load.\n\n" + header + "\n\n" + "\n".join(sections))


def _sections(text: str) -> dict[str, str]:
    """The document's sections by module name (each from its ``## name`` line to the next)."""
    parts = text.split("\n## ")
    return {p.split("\n", 1)[0].strip(): "## " + p.rstrip("\n") + "\n" for p in parts[1:]}


def update(names: list[str]) -> None:
    """Run ``names`` and put their sections into the document in place of the last run's (in ``MODULES``
    order), each stamped as a run of its own."""
    chosen = [m for m in MODULES if any(o in m for o in names)]
    text = OUTPUT.read_text() if OUTPUT.exists() else document(machine_header(), [])
    full_run = "\n".join(line for line in text.split("\n## ", 1)[0].splitlines() if line.startswith("- "))
    sections = _sections(text)
    for name in chosen:
        stamp = machine_header()
        fresh = run_module(name)
        title, rest = fresh.split("\n\n", 1)
        sections[name] = f"{title}\n\nMeasured in a run of its own, apart from the header's:\n\n{stamp}\n\n{rest}"
    OUTPUT.write_text(document(full_run, [sections[m] for m in MODULES if m in sections]))
    print(f"updated {', '.join(chosen)} in {OUTPUT.relative_to(ROOT)}", flush=True)


def main() -> None:
    os.environ.setdefault("LOG_LEVEL", "WARNING")  # no access-log lines between the tables
    if sys.argv[1:2] == ["--one"]:
        run_one(sys.argv[2])
        return
    if sys.argv[1:2] == ["--update"]:
        update(sys.argv[2:])
        return
    only = sys.argv[1:]
    header = machine_header()
    chosen = [m for m in MODULES if not only or any(o in m for o in only)]
    sections = [run_module(name) for name in chosen]
    if not only:
        OUTPUT.write_text(document(header, sections))
        print(f"wrote {OUTPUT.relative_to(ROOT)}", flush=True)


if __name__ == "__main__":
    main()
