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
    # chat answers run inside the request that asked (the same job the chat-answers queue's worker runs);
    # `make run` (infra/local_run.py) always uses the queue
    "CHAT_ANSWERS": "inline",
})

# moto's conditional writes are check-then-write without a lock; make them atomic as DynamoDB's are
from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

from chalicelib.core.config import settings  # noqa: E402
from infra.emulator import serialise_writes  # noqa: E402

serialise_writes()

# The files that take longest (a stack of their own, a fuzz run, a browser journey), started first: with
# whole files handed to workers in collection order (``--dist loadfile --no-loadscope-reorder``; xdist's
# default order, files with the most tests first, sent these one-test files last), the many short files
# then fill the other workers instead of one of these starting last and running alone at the end.
LONG_FIRST = (
    "tests/integration/platform/test_schemathesis.py",
    "tests/integration/identity/test_schemathesis.py",
    "tests/integration/gateway/test_schemathesis.py",
    "tests/integration/webapp/test_app_flows.py",
    "tests/integration/infra/test_local_state.py",
    "tests/integration/test_docs_blocks.py",
    "tests/integration/test_readme.py",
    "tests/integration/models/test_local_model.py",
)


def pytest_collection_modifyitems(config: object, items: list) -> None:
    """Put the files of ``LONG_FIRST`` first, in that order, then every other integration file, then the
    rest; within a file the order is unchanged."""
    def rank(item: object) -> tuple[int, int]:
        path = str(getattr(item, "nodeid", "")).split("::", 1)[0]
        if path in LONG_FIRST:
            return (0, LONG_FIRST.index(path))
        return (1 if path.startswith("tests/integration/") else 2, 0)

    items.sort(key=rank)  # a stable sort: within a rank the collection order stays


@pytest.fixture(autouse=True)
def _settings_read_again() -> Iterator[None]:
    """Settings are read once from the environment (``core.config``): after a test that changed it (its
    monkeypatch undone first: this fixture is set up before any other), the next test reads it again."""
    yield
    settings.cache_clear()
