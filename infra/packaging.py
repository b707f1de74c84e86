"""Deployment artefacts per route group: which pinned dependencies each group ships, and the finishing step
of ``make package`` (compiled ``.pyc`` inside the zips, unzipped size per function against Lambda's limit).

- ``requirements(group)``: the lines of ``requirements.txt`` the group needs, found by walking the imports
  (module level and inside functions) of every ``chalicelib`` module the group can reach from its route
  modules (``chalicelib/groups.py``) or, for workers, its jobs (``chalicelib/workers/jobs.py``), plus the
  pinned dependencies of those. ``python -m infra.packaging requirements`` writes
  ``infra/requirements/<group>.txt``; a test fails when a committed file drifts. Only the groups whose code
  reaches duckdb (or a retrieval library) ship it.
- ``finish(stage_dir)``: compiles every ``.py`` inside the stage's ``deployment.zip`` and layer zip into
  ``__pycache__`` (unchecked-hash ``.pyc``, valid whatever the file times in the zip, made by the deploy
  interpreter, python3.12 like Lambda's) and returns each zip's unzipped size, checked against 250 MB.
"""
from __future__ import annotations

import ast
import compileall
import functools
import importlib.metadata as metadata
import re
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path
from py_compile import PycInvalidationMode

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "requirements.txt"
OUT_DIR = ROOT / "infra" / "requirements"
LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024  # function code plus all its layers, unzipped
ALWAYS = ("chalicelib.groups", "chalicelib.core.config", "chalicelib.core.http.api")  # what app.py loads for every group
WORKER_ENTRY = ("chalicelib.workers.jobs",)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned() -> dict[str, str]:
    """requirements.txt as {normalised name: line}."""
    out = {}
    for line in REQUIREMENTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out[_norm(re.split(r"[\[=<>!~ ]", line, maxsplit=1)[0])] = line
    return out


def _module_file(module: str) -> Path | None:
    base = ROOT / Path(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports(module: str, path: Path) -> set[str]:
    """Every module name ``path`` imports, at module level or inside functions."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            found.add(name)
            found.update(f"{name}.{a.name}" for a in node.names)  # ``from pkg import module``
    return found


@functools.cache
def third_party_imports(group: str) -> frozenset[str]:
    """Top-level names of the non-project modules reachable from the group's entry modules."""
    from chalicelib.groups import GROUPS

    todo = list(ALWAYS + GROUPS[group] + (WORKER_ENTRY if group == "workers" else ()))
    seen: set[str] = set()
    outside: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path = _module_file(module)
        if path is None:
            continue
        for name in _imports(module, path):
            top = name.split(".")[0]
            if top == "chalicelib":
                parts = name.split(".")
                todo.extend(".".join(parts[:i]) for i in range(2, len(parts) + 1))
            elif top not in sys.stdlib_module_names and top not in ("__future__", "app"):
                outside.add(top)
    return frozenset(outside)


@functools.cache
def _distributions() -> dict[str, list[str]]:
    """Top-level module name -> the installed distributions providing it (a scan of every installed one)."""
    return dict(metadata.packages_distributions())


def _requires(dist: str) -> set[str]:
    try:
        reqs = metadata.requires(dist) or []
    except metadata.PackageNotFoundError:
        return set()
    return {_norm(re.split(r"[\[=<>!~ ;(]", r, maxsplit=1)[0]) for r in reqs if "extra ==" not in r}


def requirements(group: str) -> list[str]:
    """The pinned requirement lines the group ships (its imports' distributions and their pinned deps)."""
    pins = pinned()
    by_module = _distributions()
    wanted = {_norm(d) for top in third_party_imports(group) for d in by_module.get(top, [])} & set(pins)
    if "python-jose" in wanted:
        wanted.add("cryptography")  # the [cryptography] extra: RS256 through pyca/cryptography
    todo = list(wanted)
    while todo:
        for dep in _requires(todo.pop()) & set(pins):
            if dep not in wanted:
                wanted.add(dep)
                todo.append(dep)
    return sorted(pins[name] for name in wanted)


def render(group: str) -> str:
    return (f"# Dependencies of the {group} functions: generated by `python -m infra.packaging requirements`\n"
            "# from requirements.txt (the pins) and the group's imports; do not edit.\n"
            + "\n".join(requirements(group)) + "\n")


def write_requirements() -> list[Path]:
    from chalicelib.groups import GROUPS

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    written = []
    for group in GROUPS:
        path = OUT_DIR / f"{group}.txt"
        path.write_text(render(group))
        written.append(path)
    return written


def unzipped_size(path: Path) -> int:
    with zipfile.ZipFile(path) as z:
        return sum(info.file_size for info in z.infolist())


def compile_zip(path: Path, optimize: int = 0) -> int:
    """Add ``__pycache__/*.pyc`` for every ``.py`` in the zip (compiled by this interpreter); returns how many."""
    work = Path(tempfile.mkdtemp(prefix="pyc-"))
    try:
        with zipfile.ZipFile(path) as z:
            z.extractall(work)
            modes = {info.filename: info.external_attr for info in z.infolist()}
        sources = [p for p in work.rglob("*.py")]
        compileall.compile_dir(work, quiet=2, optimize=optimize, workers=1,
                               invalidation_mode=PycInvalidationMode.UNCHECKED_HASH)
        tmp = path.with_suffix(".tmp.zip")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
            for file in sorted(p for p in work.rglob("*") if p.is_file()):
                name = file.relative_to(work).as_posix()
                info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = modes.get(name, 0o644 << 16)
                info.compress_type = zipfile.ZIP_DEFLATED
                out.writestr(info, file.read_bytes())
        tmp.replace(path)
        return len(sources)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def finish(stage_dir: Path) -> dict[str, int]:
    """Compile the stage's zips and return {zip name: unzipped bytes, "total": function + layers}."""
    sizes: dict[str, int] = {}
    for zip_path in sorted(stage_dir.glob("*.zip")):
        compile_zip(zip_path)
        sizes[zip_path.name] = unzipped_size(zip_path)
    sizes["total"] = sum(sizes.values())
    return sizes


def size_line(stage: str, sizes: dict[str, int]) -> str:
    total = sizes["total"]
    verdict = "ok" if total <= LAMBDA_UNZIPPED_LIMIT else "OVER THE LIMIT"
    parts = ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in sizes.items() if k != "total")
    return (f"| {stage} | {total / 1e6:.1f} MB | {100 * total / LAMBDA_UNZIPPED_LIMIT:.0f}% of 250 MB ({verdict}) "
            f"| {parts} |")


def main(argv: list[str]) -> int:
    if argv[:1] == ["requirements"]:
        for path in write_requirements():
            print(path.relative_to(ROOT))
        return 0
    if argv[:1] == ["group-requirements"] and len(argv) == 2:
        print(render(argv[1]), end="")
        return 0
    if argv[:1] == ["finish"] and len(argv) == 3:
        stage, sizes = argv[1], finish(Path(argv[2]))
        line = size_line(stage, sizes)
        print(line)
        return 0 if sizes["total"] <= LAMBDA_UNZIPPED_LIMIT else 1
    print("usage: python -m infra.packaging requirements | group-requirements GROUP | finish STAGE DIR",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
