"""`chalice package` per stage: each template holds only its route group, and passes cfn-lint.

The project is copied with an empty requirements.txt: dependency layers are built by `make package`
(Python 3.12 wheels for Lambda), and what is checked here is the shape of each stage's template.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chalicelib.groups import HTTP_GROUPS, create_app
from infra.template import CHALICE_DIR, chalice_config, iam_policy, policy_file, resources_template, stages

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
CONFIG = json.loads((ROOT / ".chalice" / "config.json").read_text())
STAGES = sorted(CONFIG["stages"])
GROUP_REGION = {stage: (group, region) for stage, group, region in stages()}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("pkg") / "project"
    dest.mkdir()
    shutil.copy(ROOT / "app.py", dest / "app.py")
    shutil.copytree(ROOT / "chalicelib", dest / "chalicelib", ignore=shutil.ignore_patterns("__pycache__", "*.graphql.cache"))
    shutil.copytree(ROOT / ".chalice", dest / ".chalice", ignore=shutil.ignore_patterns("deployments", "deployed"))
    (dest / "requirements.txt").write_text("")
    return dest


def _package(project: Path, stage: str, out: Path, region: str | None = None) -> dict:
    env = {**os.environ, "AWS_DEFAULT_REGION": region or "us-east-1"}
    result = subprocess.run([str(BIN / "chalice"), "package", "--stage", stage, str(out)], cwd=project, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads((out / "sam.json").read_text())


def _lint(path: Path) -> None:
    result = subprocess.run([str(BIN / "cfn-lint"), str(path)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]


@pytest.mark.parametrize("stage", STAGES)
def test_stage_template_holds_only_its_group(project: Path, tmp_path: Path, stage: str) -> None:
    group, region = GROUP_REGION[stage]
    template = _package(project, stage, tmp_path, region)
    resources = template["Resources"]
    expected_paths = set(create_app(group).routes)
    if group in HTTP_GROUPS and expected_paths:
        paths = set(resources["RestAPI"]["Properties"]["DefinitionBody"]["paths"])
        assert paths == expected_paths
        env = resources["APIHandler"]["Properties"]["Environment"]["Variables"]
        assert env["ROUTE_GROUP"] == group
    else:
        assert "RestAPI" not in resources
    functions = {name: r for name, r in resources.items() if r["Type"] == "AWS::Serverless::Function"}
    for function in functions.values():  # every function of a regional stage is pinned to its region
        env = function["Properties"]["Environment"]["Variables"]
        assert env.get("REGION") == region if region else "REGION" not in env
        if region:
            assert env["BASE_URL"] == json.loads(env["REGIONAL_URLS"])[region]["base_url"]
    handlers = set(functions) - {"APIHandler"}
    if group == "workers":  # global jobs run in the global region only; regional jobs and queues everywhere
        from chalicelib.workers import jobs

        def camel(name: str) -> str:
            return "".join(part.title() for part in name.split("_"))

        regional = {camel(j.name) for j in jobs.SCHEDULED if j.scope == "regional"}
        regional |= {camel(jobs.handler_name(q)) for q in jobs.QUEUE_HANDLERS}
        global_jobs = {camel(j.name) for j in jobs.SCHEDULED if j.scope == "global"}
        assert {"RotateSigningKeys", "RetireSigningKeys"} <= global_jobs
        assert "SyncJobs" in regional
        assert handlers == (regional | global_jobs if region == "us-east-1" else regional)
    else:
        assert handlers == set()
    _lint(tmp_path / "sam.json")


def test_other_groups_routes_absent(project: Path, tmp_path: Path) -> None:
    """No other group's routes in the identity template (each group may serve its own /static and
    /v1/openapi.json, so the check uses paths that belong to one group only)."""
    identity = _package(project, "identity-dev", tmp_path / "identity")
    paths = set(identity["Resources"]["RestAPI"]["Properties"]["DefinitionBody"]["paths"])
    others = set().union(*(create_app(g).routes for g in HTTP_GROUPS if g != "identity"))
    shared = {"/static/{name}", "/v1/openapi.json"}
    assert {"/v1/me", "/graphql", "/v1/query", "/callback"} <= others
    assert not (paths & others) - shared


def test_resources_templates_pass_cfn_lint(tmp_path: Path) -> None:
    for region in ("us-east-1", "eu-central-1"):
        path = tmp_path / f"resources-{region}.json"
        path.write_text(json.dumps(resources_template(region)))
        _lint(path)
    eu = resources_template("eu-central-1")["Resources"]
    assert "UsersTable" not in eu
    assert "AuditEventsTable" in eu
    dlqs = [r for r in eu.values() if r["Type"] == "AWS::SQS::Queue" and "RedrivePolicy" in r["Properties"]]
    assert len(dlqs) == 2


def test_committed_deployment_config_is_current() -> None:
    """config.json and every policy are generated from the group and region declarations (no drift)."""
    assert CONFIG == chalice_config(), "run `make templates` to refresh .chalice/config.json"
    expected = {policy_file(group, region) for _, group, region in stages()}
    assert {p.name for p in CHALICE_DIR.glob("policy-*.json")} == expected
    for _, group, region in stages("dev"):
        committed = json.loads((CHALICE_DIR / policy_file(group, region)).read_text())
        assert committed == iam_policy(group, region), f"run `make templates` to refresh {policy_file(group, region)}"


def test_audit_table_is_append_only_for_every_function() -> None:
    for _, group, region in stages("dev"):
        denies = [s for s in iam_policy(group, region)["Statement"]
                  if s["Effect"] == "Deny" and "audit_events" in str(s["Resource"])]
        assert denies
        assert {"dynamodb:UpdateItem", "dynamodb:DeleteItem"} <= set(denies[0]["Action"])


def _allowed_resources(policy: dict) -> list[str]:
    out: list[str] = []
    for statement in policy["Statement"]:
        if statement["Effect"] == "Allow" and "Resource" in statement:
            if statement["Resource"] == "*":  # mail: only with a region condition
                assert "aws:RequestedRegion" in str(statement.get("Condition")), statement
                continue
            resource = statement["Resource"]
            out += resource if isinstance(resource, list) else [resource]
    return out


@pytest.mark.parametrize("group", ["platform", "gateway", "workers"])
def test_regional_policy_reaches_only_its_region(group: str) -> None:
    """An EU stage's policy names no us-east-1 resource except the global directory tables, and no other
    region at all; the US gateway and workers name no eu-central-1 resource."""
    from infra.resources import GLOBAL, TABLES

    directory = {f"aiplat-{t.name}" for t in TABLES if t.scope == GLOBAL}
    eu = _allowed_resources(iam_policy(group, "eu-central-1"))
    for arn in eu:
        parts = arn.split(":")
        if arn.startswith("arn:aws:s3:::"):
            assert "-eu-central-1" in arn, arn
        elif parts[3] == "us-east-1":
            assert parts[2] in ("dynamodb", "kms"), arn
            if parts[2] == "dynamodb":
                assert parts[5].split("/")[1] in directory, arn
        else:
            assert parts[3] == "eu-central-1", arn
    if group != "platform":  # the us-east-1 platform doubles as the global deployment (docs/residency.md)
        assert not [a for a in _allowed_resources(iam_policy(group, "us-east-1")) if "eu-central-1" in a]


def test_us_platform_crosses_only_into_the_minimal_records() -> None:
    from infra.template import CROSSING_TABLES

    eu = [a for a in _allowed_resources(iam_policy("platform", "us-east-1")) if "eu-central-1" in a]
    assert eu
    assert {a.split("/")[1] for a in eu} == {f"aiplat-{t}" for t in CROSSING_TABLES}
