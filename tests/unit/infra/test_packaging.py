"""Per-group dependencies and the finishing step of `make package` (.pyc in the zips, sizes)."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from chalicelib.groups import GROUPS
from infra import packaging

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_committed_group_requirements_are_current(group: str) -> None:
    path = packaging.OUT_DIR / f"{group}.txt"
    assert path.read_text() == packaging.render(group), "run `python -m infra.packaging requirements`"


def _names(group: str) -> set[str]:
    return {packaging._norm(line.split("=")[0].split("[")[0]) for line in packaging.requirements(group)}


def test_only_groups_that_reach_duckdb_ship_it() -> None:
    for group in ("identity", "app"):
        assert not {"duckdb", "numpy", "bm25s"} & _names(group), group
    for group in ("gateway", "workers"):
        assert {"duckdb", "bm25s"} <= _names(group), group
    assert "webauthn" in _names("identity")
    assert "webauthn" not in _names("gateway")
    assert "graphql-core" in _names("gateway")
    assert "graphql-core" not in _names("workers")


def test_every_group_gets_the_base_and_pins_from_requirements_txt() -> None:
    pins = set(packaging.pinned().values())
    for group in GROUPS:
        lines = packaging.requirements(group)
        assert set(lines) <= pins
        assert {"boto3", "botocore", "pynamodb", "python-jose", "cryptography"} <= _names(group)


def test_lazy_imports_inside_functions_count() -> None:
    """The sync worker loads duckdb inside functions: the walk must still find it for workers."""
    assert "duckdb" in packaging.third_party_imports("workers")


def _zip(path: Path, files: dict[str, str]) -> None:
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)


def test_finish_compiles_every_module_into_the_zip_and_reports_sizes(tmp_path: Path) -> None:
    stage = tmp_path / "stage"
    stage.mkdir()
    _zip(stage / "deployment.zip", {"app.py": "import lib.mod\nVALUE = lib.mod.X\n", "lib/__init__.py": "",
                                    "lib/mod.py": "X = 41 + 1\n"})
    _zip(stage / "managed-layer.zip", {"python/lib/python3.12/site-packages/dep.py": "Y = 1\n"})
    before = packaging.unzipped_size(stage / "deployment.zip")
    sizes = packaging.finish(stage)
    tag = sys.implementation.cache_tag
    with zipfile.ZipFile(stage / "deployment.zip") as z:
        names = set(z.namelist())
    assert {f"__pycache__/app.{tag}.pyc", f"lib/__pycache__/mod.{tag}.pyc", f"lib/__pycache__/__init__.{tag}.pyc"} <= names
    with zipfile.ZipFile(stage / "managed-layer.zip") as z:
        assert f"python/lib/python3.12/site-packages/__pycache__/dep.{tag}.pyc" in z.namelist()
    assert sizes["deployment.zip"] > before
    assert sizes["total"] == sizes["deployment.zip"] + sizes["managed-layer.zip"]
    assert "ok" in packaging.size_line("app-dev", sizes)

    # the compiled modules are what an interpreter that may not write bytecode loads (unchecked hash)
    run = tmp_path / "run"
    with zipfile.ZipFile(stage / "deployment.zip") as z:
        z.extractall(run)
    (run / "lib" / "mod.py").write_text("X = 0\n")  # a changed source is not re-read: the .pyc is used as is
    out = subprocess.run([sys.executable, "-c", "import app; print(app.VALUE)"], cwd=run, capture_output=True,
                         text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(run)},
                         check=True)
    assert out.stdout.strip() == "42"


def test_a_stage_over_the_limit_fails(tmp_path: Path) -> None:
    assert packaging.main(["finish", "x", str(tmp_path)]) == 0  # nothing to package: 0 bytes
    assert "OVER THE LIMIT" in packaging.size_line("x", {"total": packaging.LAMBDA_UNZIPPED_LIMIT + 1})


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_no_group_loads_the_heavy_libraries_at_import(group: str) -> None:
    """A cold start imports the group's app only: duckdb, NumPy, the retrieval libraries, phonenumbers and stdnum load
    at first use (the cold-import target of ``bench_packaging``). A fresh interpreter, so no other test's
    imports count."""
    probe = ("import sys; from chalicelib.groups import create_app; create_app(sys.argv[1]); "
             "print(sorted(m for m in ('duckdb', 'numpy', 'bm25s', 'webauthn', 'phonenumbers', 'stdnum') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe, group], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "ROUTE_GROUP": group}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = out.stdout.strip().splitlines()[-1]
    assert loaded == "[]", (group, loaded)


@pytest.mark.parametrize("group", sorted(set(GROUPS) - {"gateway"}))
def test_only_the_gateway_group_loads_the_query_engine_at_import(group: str) -> None:
    """The platform group holds the agent tools' input fields (a plan is checked against them), not the
    query engine behind the ``query`` tool, which loads at a run's first query."""
    probe = ("import sys; from chalicelib.groups import create_app; create_app(sys.argv[1]); "
             "print('chalicelib.gateway.query.service' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe, group], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "ROUTE_GROUP": group}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False", group


def test_loading_the_entry_leaves_the_collector_on_with_the_modules_frozen_out_of_it() -> None:
    """``app.py`` pauses the cyclic collector while the group loads, then freezes what it loaded and turns
    the collector back on (a fresh interpreter: the collector's state is process-wide)."""
    probe = "import gc, app; print(gc.isenabled(), gc.get_freeze_count() > 10000)"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "ROUTE_GROUP": "platform"}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "True True"
