"""The context layering of ``chalicelib``, as ``docs/architecture.md`` states it ("Layers"): every import of a
package (at module level or inside a function) names a package of a layer above its own. A new package must be
placed in the list; an import that runs back up fails with the file that makes it."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "chalicelib"
LAYER = re.compile(r"^- \*\*Layer (\d+)\*\*: (.+)$", re.M)


def layers() -> dict[str, int]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    out = {name: int(n) for n, names in LAYER.findall(text) for name in re.findall(r"`(\w+)`", names)}
    assert out, "docs/architecture.md lists no layers"
    return out


def package_of(path: Path) -> str:
    first = path.relative_to(PACKAGE).parts[0]
    return first.removesuffix(".py")


def imported_packages(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("chalicelib."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("chalicelib.")}
    return found


def test_every_package_is_placed() -> None:
    placed = layers()
    packages = {package_of(p) for p in PACKAGE.iterdir() if p.name != "__init__.py" and not p.name.startswith("_")
                and (p.suffix == ".py" or (p / "__init__.py").exists() or any(p.glob("*.py")))}
    assert packages - set(placed) == set(), "place these packages in docs/architecture.md, Layers"


def test_no_import_runs_back_up() -> None:
    placed = layers()
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent == PACKAGE and path.name == "__init__.py":
            continue
        own = package_of(path)
        for target in imported_packages(ast.parse(path.read_text())) - {own}:
            if placed.get(target, 99) >= placed.get(own, 0):
                wrong.append(f"{path.relative_to(ROOT)} imports {target} (layer {placed.get(target)}) from layer "
                             f"{placed.get(own)}")
    assert wrong == []
