"""`make run` refuses a wrong configuration at start, naming every problem, before anything listens."""
from __future__ import annotations

import sys

import pytest

from infra import local_run
from infra.local import config_check


def test_the_default_configuration_passes() -> None:
    config_check.check({}, ports=local_run.DEFAULT_PORTS)


def test_a_local_model_timeout_above_the_registry_cap_is_refused(tmp_path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    with pytest.raises(config_check.ConfigProblems) as err:
        config_check.check({"LOCAL_MODEL": str(model), "LOCAL_MODEL_TIMEOUT": "901"})
    assert err.value.problems == ["LOCAL_MODEL_TIMEOUT='901': must be from 1 to 900"]
    config_check.check({"LOCAL_MODEL": str(model), "LOCAL_MODEL_TIMEOUT": "900"})


def test_every_problem_is_named_at_once() -> None:
    env = {"ACCESS_TOKEN_TTL": "15m", "QUERY_MEMORY_LIMIT": "lots", "MODEL_PROVIDERS": '{"providers": 3}',
           "LOCAL_PORTS": "platform=8001", "LOCAL_WORKERS": "nope=1", "LOCAL_PERSIST": "yes",
           "LOCAL_MODEL": "/no/such/model.gguf", "QUERY_TIME_LIMIT_SECONDS": "-1", "REGIONAL_URLS": "[]",
           "OUTBOUND_ALLOW": "localhost"}
    with pytest.raises(config_check.ConfigProblems) as err:
        config_check.check(env, ports=local_run.DEFAULT_PORTS)
    text = str(err.value)
    for name in ("ACCESS_TOKEN_TTL", "QUERY_MEMORY_LIMIT", "MODEL_PROVIDERS", "port 8001", "LOCAL_WORKERS",
                 "LOCAL_PERSIST", "LOCAL_MODEL=", "QUERY_TIME_LIMIT_SECONDS", "REGIONAL_URLS", "OUTBOUND_ALLOW"):
        assert name in text, name
    assert len(err.value.problems) == 10


def test_make_run_stops_before_starting_anything(monkeypatch: pytest.MonkeyPatch, capsys, tmp_path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv("LOCAL_MODEL", str(model))
    monkeypatch.setenv("LOCAL_MODEL_TIMEOUT", "1200")
    monkeypatch.setattr(sys, "argv", ["local_run"])
    monkeypatch.setattr(local_run, "LocalPlatform", lambda: pytest.fail("make run started despite a wrong setting"))
    with pytest.raises(SystemExit) as stop:
        local_run.main()
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "LOCAL_MODEL_TIMEOUT='1200': must be from 1 to 900" in err


def test_local_endpoints_is_refused_outside_the_local_stage_and_must_be_0_or_1() -> None:
    config_check.check({"LOCAL_ENDPOINTS": "1"})
    with pytest.raises(config_check.ConfigProblems) as err:
        config_check.check({"LOCAL_ENDPOINTS": "1", "STAGE": "prod", "LOCAL_MODEL_PORT": "0"})
    assert err.value.problems == [
        "LOCAL_MODEL_PORT='0': must be from 1 to 65534",
        "LOCAL_ENDPOINTS=1 with STAGE='prod': model endpoints on this machine are admitted only under make run "
        "(STAGE local), never in a deployment"]
    with pytest.raises(config_check.ConfigProblems) as err:
        config_check.check({"LOCAL_ENDPOINTS": "yes"})
    assert err.value.problems == ["LOCAL_ENDPOINTS='yes': must be 0 or 1"]
