"""The LocalStack path without Docker: the generated init script runs (through an `awslocal` shim that hands
each command to the AWS CLI kept running, ``aws_cli_server.py``) against moto's server, then the platform
starts against that external endpoint, as it would against LocalStack."""
from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
import requests
from moto.server import ThreadedMotoServer

from infra import localstack_init
from tests.integration.conftest import free_port, start_platform, stop_platform
from tests.integration.infra.aws_cli_server import AwsCliServer

ROOT = Path(__file__).resolve().parents[3]


def test_committed_init_script_is_current() -> None:
    assert localstack_init.SCRIPT.read_text() == localstack_init.render(), "run `python -m infra.localstack_init`"


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's server, bootstrapped by the LocalStack init script (run once)."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    _run_init(endpoint, tmp_path_factory.mktemp("awslocal"))
    yield endpoint
    server.stop()


def _run_init(endpoint: str, tmp_path: Path) -> None:
    env = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}
    cli = AwsCliServer(endpoint, tmp_path / "bin", env)
    try:
        run_env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", **env}
        run_env.pop("AWS_ENDPOINT_URL", None)
        result = subprocess.run(["bash", str(localstack_init.SCRIPT)], env=run_env, capture_output=True, text=True,
                                timeout=300)
    finally:
        cli.close()
    assert result.returncode == 0 and "aiplat resources ready" in result.stdout, result.stderr[-2000:]


def test_init_script_creates_declared_resources(emulator: str) -> None:
    kw = {"endpoint_url": emulator, "aws_access_key_id": "local", "aws_secret_access_key": "local"}
    eu_tables = boto3.client("dynamodb", region_name="eu-central-1", **kw).list_tables()["TableNames"]
    us_tables = boto3.client("dynamodb", region_name="us-east-1", **kw).list_tables()["TableNames"]
    assert "aiplat-audit_events" in eu_tables
    assert "aiplat-users" not in eu_tables
    assert "aiplat-users" in us_tables
    sqs = boto3.client("sqs", region_name="eu-central-1", **kw)
    url = sqs.get_queue_url(QueueName="aiplat-sync-jobs")["QueueUrl"]
    redrive = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])["Attributes"]["RedrivePolicy"]
    assert "aiplat-sync-jobs-dlq" in redrive
    s3 = boto3.client("s3", region_name="eu-central-1", **kw)
    lock = s3.get_object_lock_configuration(Bucket="aiplat-audit-archive-eu-central-1")["ObjectLockConfiguration"]
    assert lock["Rule"]["DefaultRetention"]["Mode"] == "COMPLIANCE"


def test_platform_runs_against_an_external_endpoint(emulator: str, tmp_path: Path) -> None:
    running = start_platform(tmp_path / "state", {"AWS_ENDPOINT_URL": emulator, "AWS_ACCESS_KEY_ID": "local",
                                                  "AWS_SECRET_ACCESS_KEY": "local"})
    try:
        assert running.urls["aws_endpoint"] == emulator  # no embedded emulator was started
        me = requests.get(running.urls["platform"] + "/me", timeout=10,
                          headers={"Authorization": f"Bearer {running.demo['api_token']}"})
        assert me.status_code == 200
        assert me.json()["email"] == running.demo["email"]
    finally:
        stop_platform(running)
