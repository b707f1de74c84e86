"""The local model server of `make run` keeps one address per region across restarts, so a model
connection declared to it keeps working; a busy port falls back to a free one with a message."""
from __future__ import annotations

import socket

from infra import local_model

REGIONS = ("us-east-1", "eu-central-1")


def test_each_region_has_a_fixed_port_from_the_configurable_base() -> None:
    assert [local_model.stable_port(r, REGIONS) for r in REGIONS] == [8020, 8021]
    assert [local_model.stable_port(r, tuple(reversed(REGIONS))) for r in REGIONS] == [8020, 8021]
    assert local_model.stable_port("eu-central-1", REGIONS, base=9100) == 9101
    assert local_model.stable_port("ap-south-1", REGIONS + ("ap-south-1",)) == 8022


def test_a_free_port_is_kept_and_a_busy_one_falls_back_with_a_clear_message() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        base = probe.getsockname()[1]
    assert local_model.choose_port("us-east-1", REGIONS, base) == (base, None)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", base))
        holder.listen()
        port, message = local_model.choose_port("us-east-1", REGIONS, base)
    assert port == 0
    assert message is not None and f"port {base} (us-east-1) is busy" in message and "LOCAL_MODEL_PORT" in message
