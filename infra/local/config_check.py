"""`make run` checks its whole configuration before it starts anything.

Every setting the platform's processes read (``chalicelib/core/config.py``), the model provider file with
the local model's entry as ``make run`` will register it, and ``make run``'s own variables are checked
here at start. A wrong value stops ``make run`` with one message naming every problem, instead of a
server that starts and answers 500 at the first request that reads the value.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any


class ConfigProblems(SystemExit):
    """Raised with every problem found; ``make run`` prints it and exits 2."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("could not start, the configuration has errors:\n"
                         + "\n".join(f"  - {p}" for p in problems) + "\nFix them and run `make run` again.")
        self.code = 2

    def __str__(self) -> str:
        return str(self.args[0])


def _number(env: Mapping[str, str], name: str, default: str, low: float, high: float | None, problems: list[str],
            *, integer: bool = False) -> float | None:
    raw = env.get(name, default)
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        problems.append(f"{name}={raw!r}: must be {'an integer' if integer else 'a number'}")
        return None
    if value != value or value < low or (high is not None and value > high):  # NaN too
        span = f"from {low:g} to {high:g}" if high is not None else f"at least {low:g}"
        problems.append(f"{name}={raw!r}: must be {span}")
        return None
    return value


def _duckdb_size(env: Mapping[str, str], name: str, default: str, problems: list[str]) -> None:
    import duckdb

    raw = env.get(name, default)
    con = duckdb.connect(":memory:")
    try:
        con.execute(f"SET {'memory_limit' if name == 'QUERY_MEMORY_LIMIT' else 'max_temp_directory_size'} = $v",
                    {"v": raw})
    except duckdb.Error:
        problems.append(f"{name}={raw!r}: must be a size such as 512MB or 2GB")
    finally:
        con.close()


def _json_object(env: Mapping[str, str], name: str, problems: list[str]) -> Any:
    raw = env.get(name, "{}")
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        value = None
    if not isinstance(value, dict):
        problems.append(f"{name}: must be a JSON object")
    return value


def _ports(env: Mapping[str, str], defaults: Mapping[str, int], problems: list[str]) -> None:
    seen: dict[int, str] = {}
    ports = dict(defaults)
    for part in filter(None, env.get("LOCAL_PORTS", "").split(",")):
        name, _, value = (p.strip() for p in part.partition("="))
        if name not in defaults:
            problems.append(f"LOCAL_PORTS: unknown group {name!r} (one of {', '.join(defaults)})")
        elif not value.isdigit() or not 1 <= int(value) <= 65535:
            problems.append(f"LOCAL_PORTS: {name}={value!r} is not a port (1 to 65535)")
        else:
            ports[name] = int(value)
    emulator = _number(env, "EMULATOR_PORT", "4566", 1, 65535, problems, integer=True)
    if emulator is not None and not env.get("AWS_ENDPOINT_URL"):
        ports["emulator"] = int(emulator)
    for name, port in ports.items():
        if port in seen:
            problems.append(f"port {port} is given to both {seen[port]} and {name}")
        seen[port] = name


def _settings(env: Mapping[str, str], problems: list[str]) -> None:
    """The platform processes' settings (``chalicelib/core/config.py``), with the ranges their code needs."""
    for name, default, low, high, integer in (
            ("ACCESS_TOKEN_TTL", "900", 1, 24 * 3600, True),
            ("MAX_API_TOKEN_TTL", str(90 * 24 * 3600), 1, None, True),
            ("CATALOG_CACHE_SECONDS", "0", 0, 3600, False),
            ("QUERY_TIME_LIMIT_SECONDS", "10", 0.001, 900, False),
            ("KNOWLEDGE_CACHE_SECONDS", "2", 0, 3600, False),
            ("QUERY_CACHE_BYTES", str(256 * 1024 * 1024), 0, None, True),
            ("SIGNIN_LIMIT_FACTOR", "1", 1, 10_000, True)):
        _number(env, name, default, low, high, problems, integer=integer)
    if env.get("LOG_LEVEL", "INFO").upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        problems.append(f"LOG_LEVEL={env['LOG_LEVEL']!r}: must be DEBUG, INFO, WARNING, ERROR or CRITICAL")
    for name, default in (("QUERY_MEMORY_LIMIT", "512MB"), ("QUERY_SPILL_LIMIT", "256MB")):
        _duckdb_size(env, name, default, problems)
    urls = _json_object(env, "REGIONAL_URLS", problems)
    if isinstance(urls, dict) and not all(isinstance(v, dict) for v in urls.values()):
        problems.append("REGIONAL_URLS: must map each region to {base_url, gateway_url}")
    for entry in filter(None, (e.strip() for e in env.get("OUTBOUND_ALLOW", "").split(","))):
        host, _, port = entry.rpartition(":")
        if not host or not port.isdigit():
            problems.append(f"OUTBOUND_ALLOW: {entry!r} must be host:port")
    template = env.get("DOMAIN_VERIFICATION_URL")
    if template is not None and ("{domain}" not in template or not template.startswith(("http://", "https://"))):
        problems.append("DOMAIN_VERIFICATION_URL: must be an http(s) URL holding {domain}")


def _models(env: Mapping[str, str], problems: list[str]) -> None:
    """The provider file as the region processes will load it, the local model's entry included."""
    from chalicelib.llm.registry import MAX_TIMEOUT_S, ConfigError, load_config, parse

    local = env.get("LOCAL_MODEL", "").strip()
    timeout = _number(env, "LOCAL_MODEL_TIMEOUT", "120", 1, MAX_TIMEOUT_S, problems)
    tokens = _number(env, "LOCAL_MODEL_MAX_TOKENS", "512", 1, 32768, problems, integer=True)
    if local and not os.path.isfile(os.path.expanduser(local)):
        problems.append(f"LOCAL_MODEL={local!r}: no such file (a GGUF model file)")
    try:
        config = load_config(env.get("MODEL_PROVIDERS", ""))
    except OSError as err:
        problems.append(f"MODEL_PROVIDERS: cannot read the provider file ({err.strerror})")
        return
    except ConfigError as err:
        problems.append(f"MODEL_PROVIDERS: {err}")
        return
    if local and timeout is not None and tokens is not None and isinstance(config, dict) \
            and isinstance(config.get("providers", []), list):
        entry = {"id": "local", "kind": "openai", "endpoints": {"us-east-1": {"base_url": "http://127.0.0.1:1"}},
                 "models": [{"id": "model", "timeout_seconds": timeout, "max_answer_tokens": int(tokens)}]}
        config = {**config, "providers": [p for p in config.get("providers", []) if isinstance(p, dict)
                                          and p.get("id") != "local"] + [entry]}
    try:
        parse(config)
    except ConfigError as err:
        problems.append(f"MODEL_PROVIDERS: {err}")
    except (TypeError, ValueError, KeyError, AttributeError):
        problems.append("MODEL_PROVIDERS: the provider file does not have the documented shape (docs/api/models.md)")


def _local_endpoints(env: Mapping[str, str], problems: list[str]) -> None:
    """``LOCAL_ENDPOINTS=1`` admits model connections to this machine: ``make run`` only, never deployed."""
    value = env.get("LOCAL_ENDPOINTS", "0")
    if value not in ("0", "1", ""):
        problems.append(f"LOCAL_ENDPOINTS={value!r}: must be 0 or 1")
    elif value == "1" and env.get("STAGE", "local") != "local":
        problems.append(f"LOCAL_ENDPOINTS=1 with STAGE={env['STAGE']!r}: model endpoints on this machine are "
                        "admitted only under make run (STAGE local), never in a deployment")


def _workers(env: Mapping[str, str], problems: list[str]) -> None:
    from infra.local.workers import workers_per_queue

    try:
        workers_per_queue(env.get("LOCAL_WORKERS", ""))
    except SystemExit as err:
        problems.append(str(err))


def check(env: Mapping[str, str] | None = None, *, ports: Mapping[str, int] | None = None) -> None:
    """Raise ``ConfigProblems`` naming every wrong setting of ``env`` (the process environment)."""
    env = os.environ if env is None else env
    problems: list[str] = []
    _settings(env, problems)
    _models(env, problems)
    if ports is not None:
        _ports(env, ports, problems)
    _number(env, "LOCAL_SNAPSHOT_SECONDS", "1", 0.05, 3600, problems)
    _number(env, "LOCAL_MODEL_PORT", "8020", 1, 65534, problems, integer=True)
    _local_endpoints(env, problems)
    if env.get("LOCAL_PERSIST", "1") not in ("0", "1"):
        problems.append(f"LOCAL_PERSIST={env['LOCAL_PERSIST']!r}: must be 0 or 1")
    _workers(env, problems)
    if problems:
        raise ConfigProblems(problems)
