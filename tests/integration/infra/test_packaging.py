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
from infra.resources import AUDIT_JOBS, BUCKETS, KEYS, QUEUES
from infra.template import (
    CHALICE_DIR,
    GATEWAY_RESPONSES_FILE,
    chalice_config,
    gateway_responses,
    iam_policy,
    job_policy,
    job_policy_file,
    package_args,
    policy_file,
    resources_template,
    stages,
)

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


_PACKAGED: dict[tuple[str, str | None], Path] = {}  # (stage, region) -> where its template was written


def _package(project: Path, stage: str, out: Path, region: str | None = None) -> dict:
    """The stage's template as `make package` writes it; a stage is packaged once per module (several tests
    read the same template), so ``out`` holds it only the first time."""
    if (stage, region) not in _PACKAGED:
        env = {**os.environ, "AWS_DEFAULT_REGION": region or "us-east-1"}
        extra = package_args(stage).split()  # as `make package` does: HTTP stages merge the gateway responses
        result = subprocess.run([str(BIN / "chalice"), "package", "--stage", stage, *extra, str(out)], cwd=project,
                                env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        _PACKAGED[(stage, region)] = out
    return json.loads((_PACKAGED[(stage, region)] / "sam.json").read_text())


def _sam(stage: str, region: str | None) -> Path:
    return _PACKAGED[(stage, region)] / "sam.json"


def _lint(*paths: Path) -> None:
    """cfn-lint over templates in one run (its start, loading the resource specifications, costs more than
    checking a template)."""
    result = subprocess.run([str(BIN / "cfn-lint"), *map(str, paths)], capture_output=True, text=True, timeout=600)
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
    roles = [r for r in resources.values() if r["Type"] == "AWS::IAM::Role"]
    documents = [p["PolicyDocument"] for r in roles for p in r["Properties"].get("Policies", [])]
    assert iam_policy(group, region) in documents  # the stage runs with its own region's policy
    handlers = set(functions) - {"APIHandler"}
    if group == "workers":  # global jobs run in the global region only; regional jobs and queues everywhere
        from chalicelib.workers import jobs

        def camel(name: str) -> str:
            return "".join(part.title() for part in name.split("_"))

        regional = {camel(j.name) for j in jobs.SCHEDULED if j.scope == "regional"}
        regional |= {camel(jobs.handler_name(q)) for q in jobs.QUEUE_HANDLERS}
        global_jobs = {camel(j.name) for j in jobs.SCHEDULED if j.scope == "global"}
        assert {"RotateSigningKeys", "RetireSigningKeys"} <= global_jobs and "SyncJobs" in regional
        assert handlers == (regional | global_jobs if region == "us-east-1" else regional)
        # each audit job runs with its own role, made from its own policy file
        roles = {name: functions[name]["Properties"].get("Role") for name in handlers}
        assert len({json.dumps(roles[f]) for f in ("AuditDigest", "AuditExports", "SyncJobs")}) == 3
        for function, job in (("AuditDigest", "audit_digest"), ("AuditExports", "audit_exports")):
            role_name = roles[function]["Fn::GetAtt"][0]
            policy = resources[role_name]["Properties"]["Policies"][0]["PolicyDocument"]
            assert policy == job_policy(job, region)
    else:
        assert handlers == set()


def test_other_groups_routes_absent(project: Path, tmp_path: Path) -> None:
    """No other group's routes in the identity template (each group may serve its own /static and
    /v1/openapi.json, so the check uses paths that belong to one group only)."""
    identity = _package(project, "identity-dev", tmp_path / "identity")
    paths = set(identity["Resources"]["RestAPI"]["Properties"]["DefinitionBody"]["paths"])
    others = set().union(*(create_app(g).routes for g in HTTP_GROUPS if g != "identity"))
    shared = {"/static/{name}", "/v1/openapi.json"}
    assert {"/v1/me", "/graphql", "/v1/query", "/callback"} <= others
    assert not (paths & others) - shared


def test_every_template_passes_cfn_lint(project: Path, tmp_path: Path) -> None:
    """Every stage's template (packaged once for the module) and the resources template of each region."""
    paths = []
    for stage in STAGES:
        _package(project, stage, tmp_path / stage, GROUP_REGION[stage][1])
        paths.append(_sam(stage, GROUP_REGION[stage][1]))
    for region in ("us-east-1", "eu-central-1", "eu-west-1"):  # eu-west-1: disaster recovery only
        path = tmp_path / f"resources-{region}.json"
        path.write_text(json.dumps(resources_template(region)))
        paths.append(path)
    _lint(*paths)


def test_resources_templates_hold_their_regions_parts() -> None:
    dr = resources_template("eu-west-1")["Resources"]
    assert set(dr) == {"DrKey", "DrAlias", "DrBucket", "DrBucketPolicy"}  # no table, queue or other bucket
    eu = resources_template("eu-central-1")["Resources"]
    assert "UsersTable" not in eu and "AuditEventsTable" in eu
    dlqs = [r for r in eu.values() if r["Type"] == "AWS::SQS::Queue" and "RedrivePolicy" in r["Properties"]]
    assert len(dlqs) == len(QUEUES)


def test_unknown_routes_answer_problem_json_in_every_http_template(project: Path, tmp_path: Path) -> None:
    """API Gateway answers an unknown path or method itself (403 "Missing Authentication Token", echoing a
    non-SigV4 Authorization header): every HTTP stage's template turns that into a 404 problem with the
    request ID as correlation ID and a static body, and non-HTTP stages merge nothing."""
    for stage, group, region in stages("dev"):
        if group not in HTTP_GROUPS:
            assert package_args(stage) == ""
            continue
        if region not in (None, "eu-central-1"):
            continue
        resources = _package(project, stage, tmp_path / stage, region)["Resources"]
        responses = {r["Properties"]["ResponseType"]: r["Properties"] for r in resources.values()
                     if r["Type"] == "AWS::ApiGateway::GatewayResponse"}
        if group == "app":  # the app's unknown address is its HTML 404 page (tests/unit/infra/test_template.py)
            page = responses.pop("MISSING_AUTHENTICATION_TOKEN")
            assert page["StatusCode"] == "404"
            assert page["ResponseParameters"]["gatewayresponse.header.Content-Type"] == "'text/html; charset=utf-8'"
            assert "Fn::Sub" in page["ResponseParameters"]["gatewayresponse.header.Content-Security-Policy"]
            responses.pop("INVALID_SIGNATURE")
            responses.pop("RESOURCE_NOT_FOUND")
            assert "THROTTLED" in responses
            continue
        missing = responses["MISSING_AUTHENTICATION_TOKEN"]
        assert missing["RestApiId"] == {"Ref": "RestAPI"} and missing["StatusCode"] == "404"
        params = missing["ResponseParameters"]
        assert params["gatewayresponse.header.Content-Type"] == "'application/problem+json'"
        assert params["gatewayresponse.header.X-Correlation-Id"] == "context.requestId"
        for props in responses.values():  # never API Gateway's message, which may echo a header
            for body in props["ResponseTemplates"].values():
                problem = json.loads(body)
                assert problem["correlation_id"] == "$context.requestId" and problem["code"]
                assert "$context.error" not in body and "$input" not in body and "Authorization" not in body
        assert json.loads(missing["ResponseTemplates"]["application/json"])["status"] == 404
        assert {"INVALID_SIGNATURE", "DEFAULT_4XX", "DEFAULT_5XX"} <= set(responses)


def test_committed_deployment_config_is_current() -> None:
    """config.json and every policy are generated from the group and region declarations (no drift)."""
    assert CONFIG == chalice_config(), "run `make templates` to refresh .chalice/config.json"
    committed = json.loads((CHALICE_DIR / GATEWAY_RESPONSES_FILE).read_text())
    assert committed == gateway_responses(), f"run `make templates` to refresh {GATEWAY_RESPONSES_FILE}"
    expected = {policy_file(group, region) for _, group, region in stages()}
    expected |= {job_policy_file(job, region) for _, group, region in stages() if group == "workers" for job in AUDIT_JOBS}
    assert {p.name for p in CHALICE_DIR.glob("policy-*.json")} == expected
    for _, group, region in stages("dev"):
        committed = json.loads((CHALICE_DIR / policy_file(group, region)).read_text())
        assert committed == iam_policy(group, region), f"run `make templates` to refresh {policy_file(group, region)}"
        for job in AUDIT_JOBS if group == "workers" else ():
            committed = json.loads((CHALICE_DIR / job_policy_file(job, region)).read_text())
            assert committed == job_policy(job, region), f"run `make templates` to refresh {job_policy_file(job, region)}"


def test_each_audit_job_has_its_policy_file_in_every_workers_stage() -> None:
    for stage, conf in CONFIG["stages"].items():
        functions = conf.get("lambda_functions", {})
        region = conf["environment_variables"].get("REGION")
        if stage.startswith("workers-"):
            assert {j: functions[j]["iam_policy_file"] for j in AUDIT_JOBS} == {j: job_policy_file(j, region) for j in AUDIT_JOBS}
        else:
            assert not functions


def _allows(policy: dict, action: str) -> list[dict]:
    return [s for s in policy["Statement"] if s["Effect"] == "Allow" and action in s["Action"]]


def _denies(policy: dict, action: str) -> list[dict]:
    return [s for s in policy["Statement"] if s["Effect"] == "Deny" and action in s["Action"]]


def test_only_the_audit_jobs_sign_each_with_its_own_key() -> None:
    for _, group, region in stages("dev"):  # every route group and the other workers: Sign explicitly denied
        policy = iam_policy(group, region)
        assert not _allows(policy, "kms:Sign")
        [deny] = _denies(policy, "kms:Sign")
        assert deny["Resource"] == "*" and "Condition" not in deny
    for key in (k for k in KEYS if k.usage == "SIGN_VERIFY"):
        for region in ("us-east-1", "eu-central-1"):
            policy = job_policy(key.signer, region)
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
    policies = [(group, iam_policy(group, region)) for _, group, region in stages("dev")]
    policies += [(job, job_policy(job, "eu-central-1")) for job in AUDIT_JOBS]
    for name, policy in policies:
        denied = {r for s in _denies(policy, "s3:PutObject") for r in s["Resource"]}
        for b in guarded:
            assert (f"arn:aws:s3:::aiplat-{b.name}-*/*" in denied) is (b.writer != name), (name, b.name)
    resources = resources_template("us-east-1")["Resources"]
    for b in guarded:
        props = resources[f"{b.name.title().replace('-', '')}Bucket"]["Properties"]
        assert props["ObjectLockConfiguration"]["Rule"]["DefaultRetention"]["Mode"] == "COMPLIANCE"


def test_audit_table_is_append_only_for_every_function() -> None:
    policies = [iam_policy(group, region) for _, group, region in stages("dev")]
    policies += [job_policy(job, region) for job in AUDIT_JOBS for region in ("us-east-1", "eu-central-1")]
    for policy in policies:
        denies = [s for s in policy["Statement"] if s["Effect"] == "Deny" and "audit_events" in str(s["Resource"])]
        assert denies and {"dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem",
                           "dynamodb:PartiQLUpdate", "dynamodb:PartiQLDelete"} <= set(denies[0]["Action"])


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
    region at all but, for the workers, the DR bucket and key of the EU's declared DR region (itself in the
    EU); the US gateway and workers name no eu-central-1 resource."""
    from chalicelib.core.regions import DR_REGIONS
    from infra.resources import GLOBAL, TABLES

    directory = {f"aiplat-{t.name}" for t in TABLES if t.scope == GLOBAL}
    eu = _allowed_resources(iam_policy(group, "eu-central-1"))
    eu_dr = DR_REGIONS["eu-central"]
    assert all(r.startswith("eu-") for r in eu_dr)
    for arn in eu:
        parts = arn.split(":")
        if group == "workers" and any(arn.startswith(f"arn:aws:s3:::aiplat-dr-{r}") for r in eu_dr):
            continue  # the DR copy (chalicelib/residency/replication.py)
        if group == "workers" and parts[2] == "kms" and parts[3] in eu_dr:
            continue
        if arn.startswith("arn:aws:s3:::"):
            assert "-eu-central-1" in arn, arn
        elif arn.startswith("arn:aws:iam::"):  # customers' roles for connector sources (ExternalId-bound)
            continue
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

    policy = iam_policy("platform", "us-east-1")
    eu = [a for a in _allowed_resources(policy) if "eu-central-1" in a]
    tables = [a for a in eu if a.startswith("arn:aws:dynamodb:")]
    assert tables and {a.split("/")[1] for a in tables} == {f"aiplat-{t}" for t in CROSSING_TABLES}
    # besides those records, only the dead-letter queues' counts (GET /v1/support/dead-letters,
    # docs/decisions.md "Dead-letter queues"): their attributes, never their messages
    others = {a for a in eu if a not in tables}
    assert others == {"arn:aws:sqs:eu-central-1:*:aiplat-*-dlq", "arn:aws:sqs:eu-central-1:*:*"}
    for statement in policy["Statement"]:
        resources = statement.get("Resource")
        resources = resources if isinstance(resources, list) else [resources]
        if statement["Effect"] == "Allow" and others & set(resources):
            assert set(statement["Action"]) <= {"sqs:GetQueueUrl", "sqs:GetQueueAttributes", "sqs:ListQueues"}
