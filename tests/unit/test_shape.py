"""The shape of ``chalicelib``: small packages and imports that point down.

- No package has more than ``MAX_MODULES`` modules at its top level: a bigger context gets sub-packages
  along its seams (``gateway/api``, ``gateway/ingest``, ...), each with a README saying what goes where.
- Only ``core/http/outbound.py`` opens outbound HTTP connections (no other module imports an HTTP client).
- ``core`` imports nothing of the contexts; no context imports the composition root (``workers``) or the
  web app. (``groups`` is the route-group table: GraphQL reads its REST twins' permissions there.)
- No Python file is over ``MAX_LINES`` lines and no function over ``MAX_CCN`` cyclomatic complexity as
  ``lizard`` counts it (``and``/``or`` and comprehensions included): what grows past them is split into
  modules or small named helpers.
"""
from __future__ import annotations

import ast
from pathlib import Path

import lizard
import pytest

from tests.unit.test_import_cycles import import_graph

PACKAGE = Path(__file__).resolve().parents[2] / "chalicelib"
MAX_MODULES = 15
MAX_LINES = 700
MAX_CCN = 25
ROOTS = ("chalicelib.workers", "chalicelib.webapp")


def packages() -> list[Path]:
    return sorted(p.parent for p in PACKAGE.rglob("__init__.py"))


@pytest.mark.parametrize("package", packages(), ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_no_package_has_more_than_fifteen_top_level_modules(package: Path) -> None:
    modules = [p.name for p in package.glob("*.py") if p.name != "__init__.py"]
    assert len(modules) <= MAX_MODULES, f"{len(modules)} modules: split along a seam into sub-packages"


def _says_what_goes_where(package: Path) -> bool:
    """A README, or a package docstring in ``__init__.py``."""
    init = package / "__init__.py"
    return (package / "README.md").exists() or init.read_text().lstrip().startswith('"""')


def test_every_sub_package_of_a_context_says_what_goes_where() -> None:
    contexts = {p for p in packages() if p.parent == PACKAGE}
    missing = [str(p.relative_to(PACKAGE)) for p in packages()
               if p.parent in contexts and not _says_what_goes_where(p)]
    assert missing == []


def test_core_imports_no_context() -> None:
    graph = import_graph()
    upward = sorted((m, t) for m, targets in graph.items() if m.startswith("chalicelib.core")
                    for t in targets if not t.startswith("chalicelib.core"))
    assert upward == []


def test_no_context_imports_a_composition_root_or_the_web_app() -> None:
    graph = import_graph()
    upward = sorted((m, t) for m, targets in graph.items() for t in targets
                    if t.startswith(ROOTS) and not m.startswith(t.rsplit(".", 1)[0] if t.count(".") > 1 else t)
                    and not m.startswith(ROOTS))
    assert upward == []


def test_every_cache_of_chalicelib_enrols_in_the_process_registry() -> None:
    """No ``functools.lru_cache``/``cache`` outside ``core.process_state``: tests and local processes reset
    process state through one call (``process_state.reset_all``), never by reaching into a module."""
    offenders = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                       if p.name != "process_state.py" and ("lru_cache" in p.read_text()
                                                            or "functools import cache" in p.read_text()))
    assert offenders == []


OUTBOUND_CLIENT = PACKAGE / "core" / "http" / "outbound.py"
HTTP_CLIENT_MODULES = ("http.client", "urllib.request", "urllib3", "requests", "httpx", "aiohttp")


def test_only_the_outbound_client_opens_http_connections() -> None:
    """Every request to another server goes through ``core/http/outbound.py`` (address checks, pinning,
    timeouts, size limit, no redirect): no other module imports an HTTP client or opens a socket."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path == OUTBOUND_CLIENT:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == m or n.startswith(m + ".") for n in names for m in (*HTTP_CLIENT_MODULES, "socket")):
                offenders.append(f"{path.relative_to(PACKAGE)}: {', '.join(names)}")
    assert offenders == []


def _python_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_python_file_is_over_seven_hundred_lines() -> None:
    long = {str(p.relative_to(PACKAGE)): n for p in _python_files()
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_no_function_is_over_the_complexity_bound() -> None:
    """Lizard's cyclomatic complexity (about 1.5 s of CPU for the package)."""
    over = [f"{p.relative_to(PACKAGE)}:{f.start_line} {f.name} {f.cyclomatic_complexity}"
            for p in _python_files()
            for f in lizard.analyze_file.analyze_source_code(str(p), p.read_text()).function_list
            if f.cyclomatic_complexity > MAX_CCN]
    assert over == [], "split into small named helpers"
