"""Cold import of each route group's entry beside `import chalice, boto3`, in fresh interpreters that find no
`.pyc` (as a package without compiled files; `bench.common.cold_env`), interleaved sample by sample, and
with `.pyc` compiled ahead (what `make package` ships); then each group's unzipped size estimated from
the installed distributions of its requirements (`infra/requirements/<group>.txt`) against Lambda's
250 MB limit. `make package` writes the sizes of the real artefacts to `build/package/sizes.md`."""
from __future__ import annotations

import importlib.metadata as metadata
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import Measure, cold_env, table

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = int(os.environ.get("BENCH_IMPORT_SAMPLES", "5"))
GROUP_CODE = ("import os,sys,time;os.environ['ROUTE_GROUP']=sys.argv[1];t=time.perf_counter();import app;"
              "print(time.perf_counter()-t, 'duckdb' in sys.modules, 'numpy' in sys.modules)")
BASE_CODE = "import time;t=time.perf_counter();import chalice, boto3;print(time.perf_counter()-t, False, False)"


def _once(code: str, env: dict[str, str], *args: str) -> tuple[float, bool, bool]:
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, env=env,
                         check=True).stdout.split()
    return float(out[0]), out[1] == "True", out[2] == "True"


def _compiled_env() -> dict[str, str]:
    """Fresh interpreters that read ``.pyc`` compiled ahead into their own prefix (nothing is written)."""
    prefix = tempfile.mkdtemp(prefix="bench-pyc-")
    env = {**os.environ, "PYTHONPYCACHEPREFIX": prefix}
    for path in [str(ROOT / "chalicelib"), str(ROOT / "app.py")] + [p for p in sys.path if "site-packages" in p]:
        subprocess.run([sys.executable, "-c", "import compileall,sys,py_compile;"
                        "f=compileall.compile_file if sys.argv[1].endswith('.py') else compileall.compile_dir;"
                        "f(sys.argv[1],quiet=2,invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)",
                        path], env=env, check=True, capture_output=True)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _us(label: str, samples: list[float]) -> Measure:
    med = statistics.median(samples)
    return Measure(label, med * 1e6, float("nan"), 1 / med, len(samples))


def import_times() -> None:
    groups = ("identity", "platform", "gateway", "app", "workers")
    for title, env in (("no .pyc (as Lambda loads a package without compiled files)", cold_env()),
                       (".pyc compiled ahead (as `make package` ships)", _compiled_env())):
        base: list[float] = []
        ours: dict[str, list[float]] = {g: [] for g in groups}
        loaded: dict[str, tuple[bool, bool]] = {}
        _once(BASE_CODE, env)  # one untimed pass: the OS file cache is warm for both sides alike
        for _ in range(SAMPLES):  # interleaved: reference, then every group, per round
            base.append(_once(BASE_CODE, env)[0])
            for g in groups:
                seconds, duckdb, numpy = _once(GROUP_CODE, env, g)
                ours[g].append(seconds)
                loaded[g] = (duckdb, numpy)
        ref = _us("import chalice + boto3", base)
        table(f"Cold import per group, {title}; median of {SAMPLES} fresh interpreters", [
            (_us(f"import app (ROUTE_GROUP={g})", ours[g]), ref,
             f"<= 1.3x; duckdb loaded: {loaded[g][0]}, numpy loaded: {loaded[g][1]}") for g in groups])


def _dist_size(name: str) -> int:
    try:
        files = metadata.distribution(name).files or []
    except metadata.PackageNotFoundError:
        return 0
    total = 0
    for f in files:
        try:
            total += f.locate().stat().st_size
        except OSError:
            pass
    return total


def _closure(names: set[str]) -> set[str]:
    from infra.packaging import _norm, _requires

    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(_requires(name) - seen)
    return {_norm(n) for n in seen}


def sizes() -> None:
    from chalicelib.groups import GROUPS
    from infra.packaging import LAMBDA_UNZIPPED_LIMIT, _norm, requirements

    code = sum(p.stat().st_size for p in (ROOT / "chalicelib").rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    print("### Unzipped size per function (installed distributions of this machine, plus the project code)\n")
    print("| group | distributions | unzipped MB | of 250 MB | ships duckdb |")
    print("|---|---:|---:|---:|---|")
    for group in GROUPS:
        names = _closure({_norm(line.split("=")[0].split("[")[0]) for line in requirements(group)})
        total = code + sum(_dist_size(n) for n in names)
        print(f"| {group} | {len(names)} | {total / 1e6:.1f} | {100 * total / LAMBDA_UNZIPPED_LIMIT:.0f}% | "
              f"{'yes' if 'duckdb' in names else 'no'} |")
    print("\n(Installed sizes on this machine, `__pycache__` included, so close to a package with `.pyc`; the "
          "figures of a real build are in `build/package/sizes.md`.)\n", flush=True)


def main() -> None:
    sizes()
    import_times()
