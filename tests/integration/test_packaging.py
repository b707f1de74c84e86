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

from chalicelib.groups import GROUPS, HTTP_GROUPS, create_app
from infra.template import iam_policy, resources_template

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CONFIG = json.loads((ROOT / ".chalice" / "config.json").read_text())
STAGES = sorted(CONFIG["stages"])


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("pkg") / "project"
    dest.mkdir()
    shutil.copy(ROOT / "app.py", dest / "app.py")
    shutil.copytree(ROOT / "chalicelib", dest / "chalicelib", ignore=shutil.ignore_patterns("__pycache__", "*.graphql.cache"))
    shutil.copytree(ROOT / ".chalice", dest / ".chalice", ignore=shutil.ignore_patterns("deployments", "deployed"))
    (dest / "requirements.txt").write_text("")
    return dest


def _package(project: Path, stage: str, out: Path) -> dict:
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1"}
    result = subprocess.run([str(BIN / "chalice"), "package", "--stage", stage, str(out)], cwd=project, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads((out / "sam.json").read_text())


def _lint(path: Path) -> None:
    result = subprocess.run([str(BIN / "cfn-lint"), str(path)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]


@pytest.mark.parametrize("stage", STAGES)
def test_stage_template_holds_only_its_group(project: Path, tmp_path: Path, stage: str) -> None:
    group = stage.rsplit("-", 1)[0]
    template = _package(project, stage, tmp_path)
    resources = template["Resources"]
    expected_paths = set(create_app(group).routes)
    if group in HTTP_GROUPS and expected_paths:
        paths = set(resources["RestAPI"]["Properties"]["DefinitionBody"]["paths"])
        assert paths == expected_paths
        env = resources["APIHandler"]["Properties"]["Environment"]["Variables"]
        assert env["ROUTE_GROUP"] == group
    else:
        assert "RestAPI" not in resources
    handlers = {name for name, r in resources.items() if r["Type"] == "AWS::Serverless::Function"} - {"APIHandler"}
    if group == "workers":
        assert {"RotateSigningKeys", "RetireSigningKeys"} <= handlers
    else:
        assert handlers == set()
    _lint(tmp_path / "sam.json")


def test_other_groups_routes_absent(project: Path, tmp_path: Path) -> None:
    """A path served by one group never appears in another group's template."""
    identity = _package(project, "identity-dev", tmp_path / "identity")
    paths = set(identity["Resources"]["RestAPI"]["Properties"]["DefinitionBody"]["paths"])
    for group in HTTP_GROUPS:
        if group != "identity":
            assert not paths & set(create_app(group).routes)


def test_resources_templates_pass_cfn_lint(tmp_path: Path) -> None:
    for region in ("us-east-1", "eu-central-1"):
        path = tmp_path / f"resources-{region}.json"
        path.write_text(json.dumps(resources_template(region)))
        _lint(path)
    eu = resources_template("eu-central-1")["Resources"]
    assert "UsersTable" not in eu and "AuditEventsTable" in eu
    dlqs = [r for r in eu.values() if r["Type"] == "AWS::SQS::Queue" and "RedrivePolicy" in r["Properties"]]
    assert len(dlqs) == 2


def test_committed_policies_are_current() -> None:
    for group in GROUPS:
        committed = json.loads((ROOT / ".chalice" / f"policy-{group}.json").read_text())
        assert committed == iam_policy(group), f"run `make templates` to refresh policy-{group}.json"


def test_audit_table_is_append_only_for_every_function() -> None:
    for group in GROUPS:
        denies = [s for s in iam_policy(group)["Statement"] if s["Effect"] == "Deny" and "audit_events" in str(s["Resource"])]
        assert denies and {"dynamodb:UpdateItem", "dynamodb:DeleteItem"} <= set(denies[0]["Action"])
