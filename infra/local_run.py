"""`make run`: the whole platform on one machine, both regions side by side (DESIGN.md section 3).

When ``AWS_ENDPOINT_URL`` is unset it starts the embedded emulator (moto's server) on 127.0.0.1:4566,
the port LocalStack uses, so LocalStack or real AWS is only a change of environment. It bootstraps
both regions, seeds a demo tenant (a US and an EU workspace) and serves the global groups (identity,
app) itself. Each open region gets its own process (``python -m infra.local_run --region R``), pinned
to that region as a regional deployment is (``REGION``; only its own ``BASE_URL``/``GATEWAY_URL``): it
serves that region's platform and gateway, runs the queue workers that feed that region's SQS messages
to the handler functions Lambda would call (``infra/local/workers.py``: several threads per queue, each
retrying the emulator with backoff), and a scheduler for the scheduled handlers that run there.
Details go to stdout and ``.local/run.json``; worker health and the state's snapshots to
``.local/status.json`` (``make status``). Ctrl-C stops everything it started within ``STOP_BUDGET``.

The emulator's state persists in ``.local/emulator/`` (``infra/emulator/server.py``): a restart finds
every table, object, key, queue message and secret as it was, and the demo tenant seeded the first time
(``.local/demo.json``). ``make reset`` deletes the state directory.

Environment: ``LOCAL_HOST`` (127.0.0.1), ``LOCAL_PORTS`` (``platform=8000,gateway=8001,identity=8002,
app=8003,platform-eu-central-1=8010,gateway-eu-central-1=8011``), ``EMULATOR_PORT`` (4566),
``LOCAL_STATE_DIR`` (.local), ``LOCAL_PERSIST`` (1; 0 keeps the emulator's state in memory only),
``LOCAL_SNAPSHOT_SECONDS`` (1), ``LOCAL_WORKERS`` (threads per queue, ``agent-runs=4,sync-jobs=2``),
``APIGW_PROXY`` (1: every server behind API Gateway's proxy semantics, ``infra/local/apigw_proxy.py``: whole
buffered bodies, ``APIGW_PROXY_TIMEOUT`` seconds (29) to answer, else 504).
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from infra.local.status import health_file
from infra.local.workers import Health, start_workers

GLOBAL_REGION = "us-east-1"
GLOBAL_GROUPS = ("identity", "app")  # served by this process
REGION_GROUPS = ("platform", "gateway")  # served by each region's process
DEFAULT_PORTS = {"platform": 8000, "gateway": 8001, "identity": 8002, "app": 8003,
                 "platform-eu-central-1": 8010, "gateway-eu-central-1": 8011}
QUERY = re.compile(r"\?[^\s'\"]*")
URL_VARS = {"platform": "BASE_URL", "gateway": "GATEWAY_URL", "identity": "AUTH_URL", "app": "APP_URL"}
READY_TIMEOUT = 60
STOP_BUDGET = 4.5  # seconds from Ctrl-C to the end, whatever the state's size
DEMO_FILE = "demo.json"  # the seeded demo tenant's details, reused while the state holds it


def port_name(group: str, region: str) -> str:
    """The ``LOCAL_PORTS`` name of a regional group: the plain group name in the global region."""
    return group if region == GLOBAL_REGION else f"{group}-{region}"


def _ports() -> dict[str, int]:
    ports = dict(DEFAULT_PORTS)
    for part in filter(None, os.environ.get("LOCAL_PORTS", "").split(",")):
        name, _, value = part.partition("=")
        if name.strip() not in ports:
            raise SystemExit(f"LOCAL_PORTS: unknown group {name!r}")
        ports[name.strip()] = int(value)
    return ports


def redact(message: str) -> str:
    """A log message with every query string removed (codes, reset and access tokens travel there)."""
    return QUERY.sub("?[query omitted]", message)


def _request_handler(group: str | None = None) -> type:
    """Chalice's local request handler, without its access log: ``http.server`` writes each request
    line, query string included, to stderr. The route middleware (``core/http/api.py``) already logs one
    JSON line per request with method, path and status; errors the handler reports itself (malformed
    request lines) are logged with the query string removed. An address no route serves answers the
    404 problem, or, for a page of the ``app`` group, the app's 404 page. A request whose declared body is
    over its route's cap (``refused_body``) is answered 413 before its body is read, and the connection closed.
    A client gone before its answer is written is no error."""
    from chalice.local import ChaliceRequestHandler, ForbiddenError

    from chalicelib.core.http import streaming
    from chalicelib.core.http.api import unknown_route_response
    from chalicelib.core.logs import get_logger
    from chalicelib.webapp import uploads  # noqa: F401 - refused_body's, loaded before the first request

    log = get_logger("local.http")

    class Handler(ChaliceRequestHandler):
        # The headers and the body go out in two writes. With Nagle's algorithm on, the body waits for
        # the ACK of the headers, which a keep-alive client delays by up to 40 ms: every answer took 40 ms
        # more than its work.
        disable_nagle_algorithm = True

        def log_request(self, code: Any = "-", size: Any = "-") -> None:
            pass

        def handle(self) -> None:
            """A client that went away before its answer was written (a browser tab closed, a test's page
            done) ends the connection quietly: ``socketserver`` printed a traceback for each."""
            try:
                super().handle()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            log.warning(redact(format % args))

        def __getattr__(self, name: str) -> Any:
            """Every method (TRACE, QUERY, ...) reaches the app, which answers 405 with ``Allow`` as API
            Gateway does; ``http.server`` alone answers 501 to a method without a ``do_`` handler."""
            if name.startswith("do_"):
                return self._generic_handle
            raise AttributeError(name)

        def _generic_handle(self) -> None:
            """Chalice's emulation of API Gateway's answer to an address no route serves quotes the
            Authorization header encoded as ASCII, so a non-ASCII header raised before any answer and
            the connection dropped; that request gets the same 404 problem as any unknown address.
            A route answering a ``StreamingResponse`` is streamed (``_send_http_response``)."""
            refused = refused_body(group, self.path, self.headers)
            if refused is not None:  # answered before a byte of the body is read; the rest is never parsed
                self.close_connection = True
                return self._send_http_response(refused.status_code, dict(refused.headers), refused.body)
            try:
                with streaming.accepting():
                    super()._generic_handle()
            except UnicodeEncodeError:
                self._send_error_response(ForbiddenError({}, b""))

        def _send_http_response(self, code: int, headers: Any, body: Any) -> None:
            chunks = streaming.take()
            if chunks is None:
                return super()._send_http_response(code, headers, body)
            self._stream(code, headers, chunks)

        def _stream(self, code: int, headers: Any, chunks: Any) -> None:
            """Each chunk as one chunked-transfer piece, written and flushed as soon as it is produced. A
            client that went away (a write fails) closes the producer, which stops its work."""
            headers = {k: v for k, v in headers.items() if k.lower() not in ("content-length", "transfer-encoding")}
            headers["Transfer-Encoding"] = "chunked"
            try:
                self.send_response(code)
                self._send_headers(headers)
                for chunk in chunks:
                    data = chunk.encode("utf-8") if isinstance(chunk, str) else chunk
                    if data:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                        self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:  # BrokenPipe, ConnectionReset: the reader stopped
                self.close_connection = True
            finally:
                chunks.close()

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = do_PATCH = do_OPTIONS = _generic_handle

        def _send_error_response(self, error: Any) -> None:
            """An address no route serves: Chalice's emulation answers 403 "Missing Authentication Token"
            (echoing an Authorization header); answer the 404 problem API Gateway is configured to give."""
            if not isinstance(error, ForbiddenError):
                return super()._send_error_response(error)
            if group == "app" and self.command in ("GET", "HEAD"):  # deeper than any app route: the 404 page
                from urllib.parse import urlsplit

                from chalicelib.core.config import settings
                from chalicelib.webapp.pages import deep_not_found_page

                app_url = urlsplit(settings().app_url)  # as the gateway response does, with this origin
                status, headers, body = deep_not_found_page([f"{app_url.scheme}://{app_url.netloc}"])
                return self._send_http_response(status, headers, body)
            response = unknown_route_response(self.headers.get("x-correlation-id"))
            if group == "platform" and self.path.startswith("/scim/"):  # SCIM clients expect SCIM's error shape
                from chalicelib.core.http.api import UNKNOWN_ROUTE
                from chalicelib.platform.scim.protocol import render_error

                response = render_error(UNKNOWN_ROUTE)
            self._send_http_response(response.status_code, dict(response.headers), response.body)

    return Handler


API_GATEWAY_MAX_BODY = 10 * 1024 * 1024  # API Gateway refuses a larger payload before the function runs


def refused_body(group: str | None, path: str, headers: Any) -> Any:
    """The 413 answer for a request whose ``Content-Length`` is over its route's cap, or None: the app's
    document upload route has its own cap (``webapp/uploads.py``), every route API Gateway's payload limit."""
    from urllib.parse import unquote

    from chalicelib.core import correlation
    from chalicelib.core.http.api import problem_response
    from chalicelib.core.http.errors import ApiError
    from chalicelib.webapp import uploads

    declared = headers.get("content-length")
    if group == "app" and path.startswith("/api/upload/"):
        err = uploads.declared_too_large(unquote(headers.get("x-file-name") or ""), declared)
    elif declared and declared.isdigit() and int(declared) > API_GATEWAY_MAX_BODY:
        err = ApiError(413, "body_too_large", f"The request body exceeds {API_GATEWAY_MAX_BODY} bytes.")
    else:
        err = None
    if err is None:
        return None
    correlation.accept(headers.get("x-correlation-id"))
    response = problem_response(err)
    response.headers[correlation.HEADER] = correlation.current()
    return response


# While this file exists in the state directory, the agent-run worker waits after each step it
# completes (up to HOLD_MAX_S): tests hold a run in progress to cancel it mid-run (the product's cancel
# path is unchanged; this only decides when the next step starts).
HOLD_AGENT_STEPS = "hold-agent-steps"
HOLD_MAX_S = 120


def _agent_step_hold(index: int) -> None:
    hold = Path(os.environ.get("LOCAL_STATE_DIR", ".local")).resolve() / HOLD_AGENT_STEPS
    deadline = time.monotonic() + HOLD_MAX_S
    while hold.exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def queue_handlers() -> dict[str, Any]:
    """The handler of each queue, as Lambda would call it (the agent-run handler with ``_agent_step_hold``
    after each step)."""
    from functools import partial

    from chalicelib.agents.runtime import worker as agent_worker
    from chalicelib.workers.jobs import QUEUE_HANDLERS

    handlers = dict(QUEUE_HANDLERS)
    handlers[agent_worker.QUEUE] = partial(agent_worker.handle, after_step=_agent_step_hold)
    return handlers


def run_now_file(job: str, region: str) -> str:
    """The state-directory file that asks ``region``'s scheduler to run ``job`` at once (then removed)."""
    return f"run-now-{job}-{region}"


class Scheduler(threading.Thread):
    """Calls each scheduled handler at its rate, with a CloudWatch-shaped event; also at once when its
    ``run_now_file`` appears in the state directory (removed when the run ends: an operator, or a test,
    asks for a replication pass without waiting 5 minutes)."""

    def __init__(self, stop: threading.Event) -> None:
        super().__init__(name="scheduler", daemon=True)
        self.stop = stop

    def run(self) -> None:
        from chalicelib.core import clock
        from chalicelib.core.logs import get_logger
        from chalicelib.core.regions import served_regions
        from chalicelib.workers.jobs import SCHEDULED, runs_here

        log = get_logger("local.scheduler")
        jobs = [job for job in SCHEDULED if runs_here(job)]
        due = {job.name: clock.now() + job.every_seconds for job in jobs}
        state_dir = Path(os.environ.get("LOCAL_STATE_DIR", ".local")).resolve()
        while not self.stop.wait(1):
            for job in jobs:
                asked = [state_dir / run_now_file(job.name, r) for r in served_regions()]
                asked = [path for path in asked if path.exists()]
                if clock.now() >= due[job.name] or asked:
                    due[job.name] = clock.now() + job.every_seconds
                    try:
                        job.handler({"detail-type": "Scheduled Event", "source": "aws.events",
                                     "time": clock.iso(), "resources": [f"local:{job.name}"], "detail": {}})
                    except Exception:
                        log.exception("scheduled handler failed", extra={"job": job.name})
                    for path in asked:
                        path.unlink(missing_ok=True)


def _serve_groups(groups: dict[str, int], host: str) -> list[Any]:
    """Start a chalice dev server per route group (name -> port) in this process."""
    from chalice.config import Config
    from chalice.local import LocalDevServer

    from chalicelib.groups import create_app, prime, warm_up
    from infra.local import apigw_proxy

    warm_up()  # as a Lambda's init phase does (app.py): the first request finds its clients made,
    prime()  # and the keys and revocation watermark it reads first already read
    servers = []
    for group, port in groups.items():
        app = create_app(group)
        config = Config.create(chalice_app=app, app_name=f"aiplat-{group}", chalice_stage="local",
                               project_dir=str(Path(__file__).resolve().parent.parent))
        # APIGW_PROXY=1: the group's server on a port of its own, behind API Gateway's semantics on its port
        inner = apigw_proxy.free_port(host) if apigw_proxy.enabled() else port
        server = LocalDevServer(app, config, host, inner, handler_cls=_request_handler(group))
        threading.Thread(target=server.server.serve_forever, name=f"http-{group}", daemon=True).start()
        servers.append(server)
        if inner != port:
            servers.append(_Proxied(apigw_proxy.ApiGatewayProxy(host, port, inner).start()))
    return servers


class _Proxied:
    """A proxy in the list of servers ``stop`` shuts down (``.server.shutdown()``, ``.server.server_close()``)."""

    def __init__(self, proxy: Any) -> None:
        self.server = proxy.server


def _wait_for_port(host: str, port: int, proc: subprocess.Popen[bytes], deadline: float) -> None:
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if proc.poll() is not None:
                raise OSError(f"the region process serving port {port} exited ({proc.returncode})") from None
            if time.monotonic() > deadline:
                raise OSError(f"nothing listens on port {port}") from None
            time.sleep(0.1)


class LocalPlatform:
    """Everything `make run` starts, startable from tests too."""

    def __init__(self, *, host: str | None = None, ports: dict[str, int] | None = None,
                 emulator_port: int | None = None, state_dir: str | None = None) -> None:
        self.host = host or os.environ.get("LOCAL_HOST", "127.0.0.1")
        self.ports = ports or _ports()
        self.emulator_port = emulator_port or int(os.environ.get("EMULATOR_PORT", "4566"))
        self.state_dir = Path(state_dir or os.environ.get("LOCAL_STATE_DIR", ".local")).resolve()
        self.stop_event = threading.Event()
        self._emulator: Any = None
        self._servers: list[Any] = []
        self._children: list[subprocess.Popen[bytes]] = []
        self.local_models: list[Any] = []  # infra.local_model servers (LOCAL_MODEL)
        # URLs name "localhost" (the servers listen on 127.0.0.1): browsers refuse an IP address as the
        # WebAuthn relying-party ID, and the RP ID is the identity service's host.
        self.url_host = "localhost" if self.host == "127.0.0.1" else self.host

    def url(self, name: str) -> str:
        return f"http://{self.url_host}:{self.ports[name]}"

    def regional_urls(self) -> dict[str, dict[str, str]]:
        from chalicelib.core.regions import OPEN_REGIONS

        return {r: {"base_url": self.url(port_name("platform", r)), "gateway_url": self.url(port_name("gateway", r))}
                for r in OPEN_REGIONS}

    def _environment(self) -> str:
        endpoint = os.environ.get("AWS_ENDPOINT_URL")
        if not endpoint:
            import logging

            from infra.emulator import serialise_writes
            from infra.emulator.server import PersistentEmulator

            serialise_writes()  # conditional writes atomic, as on DynamoDB (see infra/emulator/)
            # S3 answers another account's bucket only to a grant, as AWS does (connectors read as the
            # workspace's role, in its own account: chalicelib/gateway/ingest/source_access.py)
            os.environ.setdefault("MOTO_S3_ALLOW_CROSSACCOUNT_ACCESS", "false")
            logging.getLogger("werkzeug").setLevel(logging.ERROR)

            persist = os.environ.get("LOCAL_PERSIST", "1") != "0"
            self._emulator = PersistentEmulator(self.host, self.emulator_port, self.state_dir if persist else None,
                                                interval=float(os.environ.get("LOCAL_SNAPSHOT_SECONDS", "1")))
            self._emulator.start()
            endpoint = f"http://{self.host}:{self.emulator_port}"
            os.environ["AWS_ENDPOINT_URL"] = endpoint
            for name, value in {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}.items():
                os.environ.setdefault(name, value)
        os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
        for group, var in URL_VARS.items():  # the global region's platform doubles as the global one
            os.environ[var] = self.url(group)
        os.environ["REGIONAL_URLS"] = json.dumps(self.regional_urls())
        os.environ["MAIL_OUTBOX_DIR"] = str(self.state_dir / "outbox")
        from chalicelib.core import mail

        mail.private_outbox(os.environ["MAIL_OUTBOX_DIR"])  # sign-in codes and reset links: owner only
        os.environ["LOCAL_STATE_DIR"] = str(self.state_dir)  # the region processes' too (HOLD_AGENT_STEPS)
        os.environ.setdefault("STAGE", "local")
        os.environ["CHAT_ANSWERS"] = "queue"  # answers are generated by the region processes' queue workers
        os.environ.pop("REGION", None)  # this process is global: it seeds both regions
        from chalicelib.core.config import settings

        settings.cache_clear()
        return endpoint

    def _start_regions(self) -> None:
        """One process per open region, with only that region's addresses and its pin."""
        from chalicelib.core.regions import OPEN_REGIONS

        models = self._start_local_models(OPEN_REGIONS)
        for region in OPEN_REGIONS:
            env = {**os.environ, "REGION": region, "BASE_URL": self.url(port_name("platform", region)),
                   "GATEWAY_URL": self.url(port_name("gateway", region)),
                   "LOCAL_PORTS": ",".join(f"{k}={v}" for k, v in self.ports.items()), **models.get(region, {}),
                   "LOCAL_PARENT_PID": str(os.getpid())}
            self._children.append(subprocess.Popen(
                [sys.executable, "-m", "infra.local_run", "--region", region], env=env,
                cwd=str(Path(__file__).resolve().parent.parent)))
        deadline = time.monotonic() + READY_TIMEOUT
        for region, proc in zip(OPEN_REGIONS, self._children, strict=True):
            for group in REGION_GROUPS:
                _wait_for_port(self.host, self.ports[port_name(group, region)], proc, deadline)

    def _seeded_demo(self, previous: dict[str, Any] | None) -> dict[str, Any]:
        """The demo tenant: the one seeded before when the restored state still holds it (same user,
        password, authenticator secret and API tokens), otherwise seeded now and saved at once."""
        from infra.seed import DEMO_EMAIL, seed_demo

        if previous and self._emulator is not None and self._emulator.restored["generation"]:
            from chalicelib.identity import users

            found = users.find_by_email(DEMO_EMAIL)
            if found is not None and found.id == previous.get("user_id"):
                return previous
        demo = seed_demo()
        path = self.state_dir / DEMO_FILE
        path.write_text(json.dumps(demo, indent=2))
        path.chmod(0o600)
        if self._emulator is not None:
            self._emulator.save()  # the seeded tenant is on disk before run.json says it exists
        return demo

    def _start_local_models(self, regions: tuple[str, ...]) -> dict[str, dict[str, str]]:
        """With ``LOCAL_MODEL`` (a GGUF file): one llama.cpp server per region, registered in that region's
        process as its ``local`` provider (first in ``auto``), its address declared in ``OUTBOUND_ALLOW`` so
        an Admin may also add it as a model connection. Returns each region process's extra environment."""
        path = os.environ.get("LOCAL_MODEL", "").strip()
        if not path:
            return {}
        from chalicelib.llm.registry import load_config
        from infra import local_model

        config = load_config(os.environ.get("MODEL_PROVIDERS", ""))
        extra: dict[str, dict[str, str]] = {}
        base = int(os.environ.get("LOCAL_MODEL_PORT", str(local_model.DEFAULT_PORT)))
        for region in regions:
            port, busy = local_model.choose_port(region, regions, base)  # stable across restarts
            if busy:
                print(busy, file=sys.stderr)
            server = local_model.start(path, port=port)
            server.extra["region"] = region
            self.local_models.append(server)
            entry = local_model.provider_config(
                {region: server}, tool_use=os.environ.get("LOCAL_MODEL_TOOL_USE") == "1",
                timeout_seconds=float(os.environ.get("LOCAL_MODEL_TIMEOUT", "120")),
                max_answer_tokens=int(os.environ.get("LOCAL_MODEL_MAX_TOKENS", "512")))
            providers = [p for p in config.get("providers", []) if p.get("id") != "local"] + [entry]
            preference = [f"local/{server.model}"] + list(config.get("preference", []))
            allow = ",".join(filter(None, [os.environ.get("OUTBOUND_ALLOW", ""), f"127.0.0.1:{server.port}"]))
            extra[region] = {"MODEL_PROVIDERS": json.dumps({**config, "providers": providers, "preference": preference}),
                             "OUTBOUND_ALLOW": allow}
        return extra

    def start(self) -> dict[str, Any]:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        try:
            previous = json.loads((self.state_dir / DEMO_FILE).read_text())
        except (OSError, ValueError):
            previous = None
        endpoint = self._environment()  # refuses to start while another `make run` holds this state
        # only now (this run owns the state directory): the last run's files, written again once everything is up
        (self.state_dir / "run.json").unlink(missing_ok=True)
        for stale in [self.state_dir / "status.json", *self.state_dir.glob("health-*.json")]:
            stale.unlink(missing_ok=True)  # the last run's: this run's processes write their own
        from chalicelib.core.config import settings
        from chalicelib.core.regions import OPEN_REGIONS
        from infra.bootstrap import bootstrap_all
        from infra.local.status import StatusReporter

        bootstrap_all()
        demo = self._seeded_demo(previous)
        self._servers = _serve_groups({g: self.ports[g] for g in GLOBAL_GROUPS}, self.host)
        self._start_regions()
        emulator = self._emulator
        self.status = StatusReporter(self.state_dir, OPEN_REGIONS,
                                     lambda: emulator.status() if emulator is not None else {}, self.stop_event,
                                     out=lambda line: print(line, flush=True))
        self.status.start()
        regions = {region: {"platform": urls["base_url"] + "/v1", "gateway": urls["gateway_url"]}
                   for region, urls in self.regional_urls().items()}
        info = {
            "urls": {"platform": os.environ["BASE_URL"] + "/v1", "gateway": os.environ["GATEWAY_URL"],
                     "identity": os.environ["AUTH_URL"], "app": os.environ["APP_URL"], "aws_endpoint": endpoint},
            "regions": regions,
            "demo": demo,
            "outbox": os.environ["MAIL_OUTBOX_DIR"],
            "resource_prefix": settings().resource_prefix,  # operator commands name the same tables
            "pid": os.getpid(),
            "state": emulator.status() if emulator is not None else {"persistent": False},
            "local_models": {m.extra["region"]: {"model": f"local/{m.model}", "base_url": m.base_url}
                             for m in self.local_models},
        }
        path = self.state_dir / "run.json"
        tmp = self.state_dir / "run.json.tmp"
        tmp.write_text(json.dumps(info, indent=2))
        tmp.chmod(0o600)
        os.replace(tmp, path)
        return info

    def stop(self) -> dict[str, Any]:
        """Stop everything in at most ``STOP_BUDGET`` seconds, whatever the state's size; returns how the
        emulator's last snapshot went (written, or still being written by a background writer)."""
        deadline = time.monotonic() + STOP_BUDGET
        self.stop_event.set()
        for child in self._children:
            child.terminate()
        for server in self._servers:
            server.server.shutdown()
            server.server.server_close()
        for child in self._children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic() - 2.5))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        for model in self.local_models:
            model.stop()
        if self._emulator is not None:
            self._emulator.stop_budget = max(1.0, deadline - time.monotonic())
            return self._emulator.stop()
        return {}


def die_with_parent() -> None:
    """Be killed by the kernel the moment the parent `make run` dies, however it dies (``kill -9``
    included): its region processes must not outlive it holding their ports (the next `make run`, on
    the same ports, would find them in use). Linux's ``PR_SET_PDEATHSIG``; elsewhere, and for a parent
    that died before this call, the parent watch of ``serve_region`` and the check below."""
    expected = os.environ.get("LOCAL_PARENT_PID")
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        try:
            ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if expected and os.getppid() != int(expected):  # the parent died before the death signal was set
        os._exit(0)


def serve_region(region: str) -> None:
    """A region's process: its platform and gateway, its worker loop and scheduler, until SIGTERM or
    until the parent `make run` goes away (killed with it: ``die_with_parent``)."""
    die_with_parent()
    from chalicelib.core.config import settings

    settings.cache_clear()
    if settings().region != region:
        raise SystemExit(f"REGION must be {region}")
    host = os.environ.get("LOCAL_HOST", "127.0.0.1")
    ports = _ports()
    stop = threading.Event()
    health = Health()
    start_workers(region, queue_handlers(), stop, health)  # before serving: its start-up calls are done when the ports open
    servers = _serve_groups({g: ports[port_name(g, region)] for g in REGION_GROUPS}, host)
    Scheduler(stop).start()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    parent = os.getppid()
    state_dir = Path(os.environ.get("LOCAL_STATE_DIR", ".local")).resolve()
    while not stop.wait(0.5):
        health.write(health_file(state_dir, region))
        if os.getppid() != parent:
            stop.set()
    for server in servers:
        server.server.shutdown()


def busy_ports(host: str, ports: dict[str, int]) -> list[tuple[str, int]]:
    """The (name, port) pairs something already listens on, checked before anything starts.

    The probe binds as the servers do (``SO_REUSEADDR``): a port whose last connections are still in
    ``TIME_WAIT`` (a run just killed with ``kill -9``, whose emulator closed its connections first) is
    free for them, and only a listening socket makes it busy."""
    busy = []
    for name, port in ports.items():
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError:
                busy.append((name, port))
    return busy


def main() -> None:
    if sys.argv[1:2] == ["--region"]:
        serve_region(sys.argv[2])
        return
    started = time.monotonic()
    from infra.local import config_check

    try:
        config_check.check(ports=DEFAULT_PORTS)  # every setting, before anything starts
    except config_check.ConfigProblems as err:
        print(err, file=sys.stderr)
        raise SystemExit(2) from None
    platform = LocalPlatform()
    wanted = dict(platform.ports)
    if not os.environ.get("AWS_ENDPOINT_URL"):
        wanted["emulator"] = platform.emulator_port
    busy = busy_ports(platform.host, wanted)
    if busy:
        names = ", ".join(f"{port} ({name})" for name, port in busy)
        fix = ",".join(f"{name}={port + 100}" for name, port in busy if name != "emulator")
        print(f"could not start: port {names} already in use on {platform.host}. Stop what listens there "
              f"(`ss -ltnp` names it), or choose free ports: LOCAL_PORTS={fix or 'platform=8100'}"
              f"{' EMULATOR_PORT=' + str(platform.emulator_port + 100) if any(n == 'emulator' for n, _ in busy) else ''}"
              " make run", file=sys.stderr)
        raise SystemExit(1)
    try:
        info = platform.start()
    except OSError as err:
        print(f"could not start: {err} (is another `make run` already running?)", file=sys.stderr)
        platform.stop()
        raise SystemExit(1) from None
    demo = info["demo"]
    state = info["state"]
    print(f"\naiplat is running ({time.monotonic() - started:.1f}s)\n")
    if state.get("persistent") and state["restored"]["generation"]:
        print(f"  state         restored from {state['directory']} ({state['restored']['seconds']:.1f}s); "
              "`make reset` starts fresh")
    elif state.get("persistent"):
        print(f"  state         new, kept in {state['directory']} across restarts; `make reset` starts fresh")
    for name, url in info["urls"].items():
        print(f"  {name:<13} {url}")
    for region, urls in info["regions"].items():
        print(f"  {region:<13} platform {urls['platform']}  gateway {urls['gateway']}")
    for region, model in info["local_models"].items():
        print(f"  {region:<13} local model {model['model']} (llama.cpp at {model['base_url']})")
    if not info["local_models"]:
        print("\nNo generative model: chat answers quote sources. LOCAL_MODEL=/path/model.gguf make run starts one.")
    print("\nDemo sign-in (also in .local/run.json):")
    for key in ("email", "password", "totp_secret", "workspace_id", "eu_workspace_id"):
        if demo.get(key):
            print(f"  {key:<13} {demo[key]}")
    print(f"  api_token     {str(demo.get('api_token', ''))[:24]}... (full value in run.json; EU: eu_api_token)")
    print(f"\nE-mail outbox (sign-in codes, reset links, invitations): {info['outbox']}")
    print(f"Try (a 15-minute access token of the demo user): TOKEN=$(make -s token); "
          f"curl -s -H \"Authorization: Bearer $TOKEN\" {info['urls']['platform']}/me"
          "\nWorker health and state snapshots: `make status` (changes are printed here).\n\nCtrl-C stops everything.",
          flush=True)
    done = threading.Event()
    # explicit handlers: a SIGINT inherited as ignored (started in the background) must still stop us
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    while not done.wait(0.5):
        pass
    print("\nstopping...", flush=True)
    stopping = time.monotonic()
    saved = platform.stop()
    took = time.monotonic() - stopping
    if saved.get("saved"):
        print(f"stopped in {took:.1f}s; state saved in {platform.state_dir} (make reset starts fresh)", flush=True)
    elif saved.get("background_pid"):
        print(f"stopped in {took:.1f}s; the last state snapshot is still being written (pid "
              f"{saved['background_pid']}); the next `make run` waits for it", flush=True)
    else:
        print(f"stopped in {took:.1f}s", flush=True)
    # Everything is stopped and saved: skip the interpreter's teardown, which spends seconds freeing the
    # emulator's objects one by one (the stop budget is for the whole exit, whatever the state's size).
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
