"""Cold import of each route group's entry beside `import chalice, boto3`, in fresh interpreters that find no
`.pyc` (as a package without compiled files; `bench.common.cold_env`), interleaved sample by sample, and
with `.pyc` compiled ahead (what `make package` ships); a cold start as a function pays it: `import app`
plus the group's first request (its deferred imports, clients, key ring and first reads), against a moto
server in another process, beside `import chalice, boto3` plus one `GetItem` from a new client. Ours pauses
the cyclic garbage collector while `app.py` loads (the reference, a bare import, does not); then each
group's unzipped size estimated from the installed distributions of its requirements (`infra/requirements/<group>.txt`) against Lambda's
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
    return Measure(label, med * 1e6, float("nan"), 1 / med, len(samples), min(samples) * 1e6, max(samples) * 1e6)


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


FIRST_REQUEST_CODE = (
    "import os,sys,time;os.environ['ROUTE_GROUP']=sys.argv[1];t=time.perf_counter();import app;"
    "t1=time.perf_counter();from chalice.test import Client;c=Client(app.app);"
    "h={'Authorization':'Bearer '+sys.argv[3]} if sys.argv[3] else {};t2=time.perf_counter();"
    "r=c.http.get(sys.argv[2],headers=h);t3=time.perf_counter();"
    "assert r.status_code<400,(r.status_code,r.body[:300]);print(t1-t+t3-t2, t1-t, t3-t2)")
BARE_FIRST_CODE = (
    "import sys,time;t=time.perf_counter();import chalice,boto3;c=boto3.client('dynamodb','us-east-1');"
    "c.get_item(TableName=sys.argv[1],Key={'id':{'S':'x'}});print(time.perf_counter()-t, 0, 0)")
SETUP_CODE = (
    "import json;from infra.bootstrap import bootstrap_all;bootstrap_all();"
    "from chalicelib.identity.oauth import signing;signing.ensure_key();"
    "from tests.functional.conftest import make_tenant;from tests.functional.gateway.data import put_dataset,field;"
    "t=make_tenant('cold@example.com',name='Cold');put_dataset(t.workspace_id,t.region,'orders',[field('id')],[]);"
    "from chalicelib.core import aws;print(json.dumps({'token':t.token,'table':aws.table_name('workspaces')}))")
FIRST_REQUESTS = (("platform", "/v1/me", True), ("gateway", "/v1/catalog/datasets?q=orders", True),
                  ("identity", "/.well-known/jwks.json", False), ("app", "/", False))


def _times(code: str, env: dict[str, str], *args: str) -> tuple[float, float, float]:
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    total, imported, first = (float(x) for x in out.stdout.split()[-3:])
    return total, imported, first


def first_requests() -> None:
    """``import app`` plus the first request of each group, in fresh interpreters (``.pyc`` compiled ahead),
    against a moto server of its own in another process; interleaved with the reference per round."""
    from infra.emulator.process import moto_process

    env = {k: v for k, v in _compiled_env().items() if not k.startswith("AWS_ENDPOINT_URL")}
    env.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
                "RESOURCE_PREFIX": "aiplat-cold", "LOG_LEVEL": "WARNING"})
    with moto_process(env) as endpoint:
        env["AWS_ENDPOINT_URL"] = endpoint
        setup = subprocess.run([sys.executable, "-c", SETUP_CODE], cwd=ROOT, capture_output=True, text=True, env=env,
                               check=True).stdout.strip().splitlines()[-1]
        import json

        seed = json.loads(setup)
        base: list[float] = []
        ours: dict[str, list[tuple[float, float, float]]] = {g: [] for g, _, _ in FIRST_REQUESTS}
        for _ in range(SAMPLES):
            base.append(_times(BARE_FIRST_CODE, env, seed["table"])[0])
            for group, path, authed in FIRST_REQUESTS:
                ours[group].append(_times(FIRST_REQUEST_CODE, env, group, path, seed["token"] if authed else ""))
    ref = _us("import chalice + boto3 + one GetItem (new client)", base)
    rows = []
    for group, path, _ in FIRST_REQUESTS:
        samples = ours[group]
        imported = statistics.median(x[1] for x in samples)
        first = statistics.median(x[2] for x in samples)
        rows.append((_us(f"import app + first GET {path} (ROUTE_GROUP={group})", [x[0] for x in samples]), ref,
                     f"of which import {imported * 1e3:.0f} ms, first request {first * 1e3:.0f} ms (moto server "
                     "in another process, on this machine)"))
    table(f"Cold start as a function pays it, .pyc compiled ahead; median of {SAMPLES} fresh interpreters", rows)


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
    first_requests()
