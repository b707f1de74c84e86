"""A route states its permission once, in ``Api.route(..., permission=...)``: no route module checks a
permission again in its body (the wrapper also does the workspace check for ``{workspace_id}`` paths)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SECOND_CHECK = re.compile(r"(?<![.\w])(require|authorize|require_workspace)\(ctx\.user, [^)]*\)")


def test_no_route_module_repeats_a_permission_check() -> None:
    repeats = {str(p.relative_to(ROOT)): SECOND_CHECK.findall(p.read_text())
               for p in (ROOT / "chalicelib").rglob("*_routes.py")}
    assert {path: found for path, found in repeats.items() if found} == {}
