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
from infra.resources import AUDIT_JOBS, BUCKETS, KEYS, QUEUES
from infra.template import iam_policy, job_policy, policy_file, resources_template

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
        assert {"RotateSigningKeys", "RetireSigningKeys", "AuditDigest", "AuditExports"} <= handlers
        # each audit job runs with its own role, made from its own policy file
        roles = {name: resources[name]["Properties"].get("Role") for name in handlers}
        assert roles["AuditDigest"] != roles["AuditExports"] != roles["SyncJobs"] != roles["AuditDigest"]
        for function, job in (("AuditDigest", "audit_digest"), ("AuditExports", "audit_exports")):
            role_name = roles[function]["Fn::GetAtt"][0]
            policy = resources[role_name]["Properties"]["Policies"][0]["PolicyDocument"]
            assert policy == job_policy(job)
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
    assert "UsersTable" not in eu and "AuditEventsTable" in eu
    dlqs = [r for r in eu.values() if r["Type"] == "AWS::SQS::Queue" and "RedrivePolicy" in r["Properties"]]
    assert len(dlqs) == len(QUEUES)


def test_committed_policies_are_current() -> None:
    for name, policy in [(g, iam_policy(g)) for g in GROUPS] + [(j, job_policy(j)) for j in AUDIT_JOBS]:
        committed = json.loads((ROOT / ".chalice" / policy_file(name)).read_text())
        assert committed == policy, f"run `make templates` to refresh {policy_file(name)}"


def test_each_audit_job_has_its_policy_file_in_every_workers_stage() -> None:
    for stage, conf in CONFIG["stages"].items():
        functions = conf.get("lambda_functions", {})
        if stage.startswith("workers-"):
            assert {j: functions[j]["iam_policy_file"] for j in AUDIT_JOBS} == {j: policy_file(j) for j in AUDIT_JOBS}
        else:
            assert not functions


def _allows(policy: dict, action: str) -> list[dict]:
    return [s for s in policy["Statement"] if s["Effect"] == "Allow" and action in s["Action"]]


def _denies(policy: dict, action: str) -> list[dict]:
    return [s for s in policy["Statement"] if s["Effect"] == "Deny" and action in s["Action"]]


def test_only_the_audit_jobs_sign_each_with_its_own_key() -> None:
    for group in GROUPS:  # every route group and the other workers: no Sign at all, explicitly denied
        policy = iam_policy(group)
        assert not _allows(policy, "kms:Sign")
        [deny] = _denies(policy, "kms:Sign")
        assert deny["Resource"] == "*" and "Condition" not in deny
    for key in (k for k in KEYS if k.usage == "SIGN_VERIFY"):
        policy = job_policy(key.signer)
        [allow] = _allows(policy, "kms:Sign")
        assert allow["Condition"] == {"ForAnyValue:StringEquals": {"kms:ResourceAliases": [f"alias/aiplat-{key.name}"]}}
        [deny] = _denies(policy, "kms:Sign")  # ... and no other key, even one the account creates later
        assert deny["Condition"] == {"ForAllValues:StringNotEquals": {"kms:ResourceAliases": [f"alias/aiplat-{key.name}"]}}
    assert {k.signer for k in KEYS if k.usage == "SIGN_VERIFY"} == {"audit_digest", "audit_exports"}


def test_signing_keys_refuse_sign_to_every_other_principal() -> None:
    resources = resources_template("eu-central-1")["Resources"]
    for key in (k for k in KEYS if k.signer):
        statements = resources[f"{key.name.title().replace('-', '')}Key"]["Properties"]["KeyPolicy"]["Statement"]
        [deny] = [s for s in statements if s["Effect"] == "Deny"]
        assert deny["Action"] == "kms:Sign" and deny["Principal"] == "*"
        assert deny["Condition"]["ArnNotLike"]["aws:PrincipalArn"]["Fn::Sub"].endswith(f"-{key.signer}")


def test_audit_buckets_are_written_only_by_their_job() -> None:
    guarded = [b for b in BUCKETS if b.writer]
    assert {b.name for b in guarded} == {"audit-archive", "audit-digests"}
    for name, policy in [(g, iam_policy(g)) for g in GROUPS] + [(j, job_policy(j)) for j in AUDIT_JOBS]:
        denied = {r for s in _denies(policy, "s3:PutObject") for r in s["Resource"]}
        for b in guarded:
            assert (f"arn:aws:s3:::aiplat-{b.name}-*/*" in denied) is (b.writer != name), (name, b.name)
    resources = resources_template("us-east-1")["Resources"]
    for b in guarded:
        props = resources[f"{b.name.title().replace('-', '')}Bucket"]["Properties"]
        assert props["ObjectLockConfiguration"]["Rule"]["DefaultRetention"]["Mode"] == "COMPLIANCE"


def test_audit_table_is_append_only_for_every_function() -> None:
    for policy in [iam_policy(g) for g in GROUPS] + [job_policy(j) for j in AUDIT_JOBS]:
        denies = [s for s in policy["Statement"] if s["Effect"] == "Deny" and "audit_events" in str(s["Resource"])]
        assert denies and {"dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem",
                           "dynamodb:PartiQLUpdate", "dynamodb:PartiQLDelete"} <= set(denies[0]["Action"])
