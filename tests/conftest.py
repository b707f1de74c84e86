"""Shared fixtures. Unit and functional tests run against moto in-process: every AWS_ENDPOINT_URL*
variable is removed first, otherwise ``mock_aws`` stops intercepting."""
from __future__ import annotations

import os

for _name in [n for n in os.environ if n.startswith("AWS_ENDPOINT_URL")]:
    del os.environ[_name]
os.environ.update({
    "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1", "RESOURCE_PREFIX": "aiplat-test",
    # botocore sends ARN-addressed DynamoDB Streams calls to <account>.streams-ddb.<region>, a host
    # mock_aws does not route (moto 5.2); the regional endpoint is what moto serves
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
})

# moto's conditional writes are check-then-write without a lock; make them atomic as DynamoDB's are
from infra.emulator import serialise_writes  # noqa: E402

serialise_writes()
