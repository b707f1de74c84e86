"""Services take the request scope: only tenancy, the entry points and the workers look a workspace up.

A service that acts for a workspace takes the ``RequestScope`` (``core.tenancy``) as its first argument:
the workspace, its region and directory entry, the caller and its live role, resolved once where the
request enters. So ``region_of`` and ``get_workspace`` are called only in

- ``core/tenancy.py`` (where they live) and ``core/http/`` (the authorisation path that builds the scope);
- entry points: route modules (``routes.py``, ``*_routes.py``), GraphQL (``*graphql*.py``) and MCP
  (``gateway/mcp/``), which build the scope of a request;
- workers (``worker.py``, ``*_worker.py``, ``workers/``), which build the scope of a queued job;
- ``identity/``, which issues the tokens a scope is later built from (no scope exists yet there).
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "chalicelib"
LOOKUPS = {"region_of", "get_workspace"}


def allowed(path: Path) -> bool:
    rel = path.relative_to(PACKAGE)
    parts, name = rel.parts, path.name
    return (str(rel) == "core/tenancy.py" or parts[:2] == ("core", "http") or parts[0] in {"identity", "workers"}
            or name == "routes.py" or name.endswith("_routes.py") or "graphql" in name
            or parts[:2] == ("gateway", "mcp") or name == "worker.py" or name.endswith("_worker.py"))


def lookups(path: Path) -> list[int]:
    """Lines of ``path`` that call ``region_of`` or ``get_workspace`` (by name or as an attribute)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name in LOOKUPS:
                lines.append(node.lineno)
    return lines


def test_only_tenancy_entry_points_and_workers_look_a_workspace_up() -> None:
    offenders = {str(p.relative_to(PACKAGE)): lookups(p) for p in sorted(PACKAGE.rglob("*.py")) if not allowed(p)}
    assert {p: lines for p, lines in offenders.items() if lines} == {}, \
        "take the RequestScope from the caller instead of looking the workspace up"


def test_the_rule_sees_a_lookup() -> None:
    assert lookups(PACKAGE / "core" / "tenancy.py")  # where they live: the walker finds calls
    assert not allowed(PACKAGE / "chat" / "service.py") and allowed(PACKAGE / "chat" / "routes.py")
