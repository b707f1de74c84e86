"""`make run`: the whole platform on one machine (DESIGN.md section 3).

When ``AWS_ENDPOINT_URL`` is unset it starts the embedded emulator (moto's server) on 127.0.0.1:4566,
the port LocalStack uses, so LocalStack or real AWS is only a change of environment. It bootstraps
both regions, seeds a demo tenant, serves the HTTP route groups, runs a worker loop that feeds SQS
messages to the same handler functions Lambda would call, and a scheduler for the scheduled handlers.
Details go to stdout and ``.local/run.json``. Ctrl-C stops everything it started.

Environment: ``LOCAL_HOST`` (127.0.0.1), ``LOCAL_PORTS`` (``platform=8000,gateway=8001,identity=8002,
app=8003``), ``EMULATOR_PORT`` (4566), ``LOCAL_STATE_DIR`` (.local).
"""
from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

DEFAULT_PORTS = {"platform": 8000, "gateway": 8001, "identity": 8002, "app": 8003}
QUERY = re.compile(r"\?[^\s'\"]*")
URL_VARS = {"platform": "BASE_URL", "gateway": "GATEWAY_URL", "identity": "AUTH_URL", "app": "APP_URL"}


def _ports() -> dict[str, int]:
    ports = dict(DEFAULT_PORTS)
    for part in filter(None, os.environ.get("LOCAL_PORTS", "").split(",")):
        name, _, value = part.partition("=")
        if name.strip() not in ports:
            raise SystemExit(f"LOCAL_PORTS: unknown group {name!r}")
        ports[name.strip()] = int(value)
    return ports


def sqs_event(messages: list[dict[str, Any]], region: str, queue_arn: str) -> dict[str, Any]:
    """The event Lambda's SQS integration delivers, built from ReceiveMessage results."""
    records = []
    for m in messages:
        attrs = {k: {"stringValue": v.get("StringValue"), "dataType": v.get("DataType", "String")}
                 for k, v in (m.get("MessageAttributes") or {}).items()}
        records.append({
            "messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
            "attributes": m.get("Attributes", {}), "messageAttributes": attrs, "md5OfBody": m.get("MD5OfBody", ""),
            "eventSource": "aws:sqs", "eventSourceARN": queue_arn, "awsRegion": region,
        })
    return {"Records": records}


def redact(message: str) -> str:
    """A log message with every query string removed (codes, reset and access tokens travel there)."""
    return QUERY.sub("?[query omitted]", message)


def _request_handler() -> type:
    """Chalice's local request handler, without its access log: ``http.server`` writes each request
    line, query string included, to stderr. The route middleware (``core/web.py``) already logs one
    JSON line per request with method, path and status; errors the handler reports itself (malformed
    request lines) are logged with the query string removed."""
    from chalice.local import ChaliceRequestHandler

    from chalicelib.core.logs import get_logger

    log = get_logger("local.http")

    class Handler(ChaliceRequestHandler):
        def log_request(self, code: Any = "-", size: Any = "-") -> None:
            pass

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            log.warning(redact(format % args))

    return Handler


class WorkerLoop(threading.Thread):
    """Receives from every region's handled queues and calls the handlers, as Lambda's poller would."""

    def __init__(self, stop: threading.Event) -> None:
        super().__init__(name="worker-loop", daemon=True)
        self.stop = stop

    def run(self) -> None:
        from chalicelib.core import aws
        from chalicelib.core.logs import get_logger
        from chalicelib.core.regions import OPEN_REGIONS
        from chalicelib.workers.jobs import QUEUE_HANDLERS

        log = get_logger("local.worker")
        while not self.stop.is_set():
            if not QUEUE_HANDLERS:
                self.stop.wait(1)
                continue
            for region in OPEN_REGIONS:
                for queue, handler in QUEUE_HANDLERS.items():
                    if self.stop.is_set():
                        return
                    sqs = aws.client("sqs", region)
                    url = aws.queue_url(queue, region)
                    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                              AttributeNames=["All"], MessageAttributeNames=["All"])
                    messages = got.get("Messages", [])
                    if not messages:
                        continue
                    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
                    try:
                        result = handler(sqs_event(messages, region, arn)) or {}
                    except Exception:  # Lambda would retry the whole batch after the visibility timeout
                        log.exception("queue handler failed", extra={"queue": queue, "region": region})
                        continue
                    failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
                    for m in messages:
                        if m["MessageId"] not in failed:
                            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


class Scheduler(threading.Thread):
    """Calls each scheduled handler at its rate, with a CloudWatch-shaped event."""

    def __init__(self, stop: threading.Event) -> None:
        super().__init__(name="scheduler", daemon=True)
        self.stop = stop

    def run(self) -> None:
        from chalicelib.core import clock
        from chalicelib.core.logs import get_logger
        from chalicelib.workers.jobs import SCHEDULED

        log = get_logger("local.scheduler")
        due = {job.name: clock.now() + job.every_seconds for job in SCHEDULED}
        while not self.stop.wait(1):
            for job in SCHEDULED:
                if clock.now() >= due[job.name]:
                    due[job.name] = clock.now() + job.every_seconds
                    try:
                        job.handler({"detail-type": "Scheduled Event", "source": "aws.events",
                                     "time": clock.iso(), "resources": [f"local:{job.name}"], "detail": {}})
                    except Exception:
                        log.exception("scheduled handler failed", extra={"job": job.name})


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
        self._threads: list[threading.Thread] = []

    def _environment(self) -> str:
        endpoint = os.environ.get("AWS_ENDPOINT_URL")
        if not endpoint:
            import logging

            from moto.server import ThreadedMotoServer

            from infra.emulator import serialise_writes

            serialise_writes()  # conditional writes atomic, as on DynamoDB (see infra/emulator.py)
            # S3 answers another account's bucket only to a grant, as AWS does (connectors read as the
            # workspace's role, in its own account: chalicelib/gateway/source_access.py)
            os.environ.setdefault("MOTO_S3_ALLOW_CROSSACCOUNT_ACCESS", "false")
            logging.getLogger("werkzeug").setLevel(logging.ERROR)

            self._emulator = ThreadedMotoServer(ip_address=self.host, port=self.emulator_port, verbose=False)
            self._emulator.start()
            endpoint = f"http://{self.host}:{self.emulator_port}"
            os.environ["AWS_ENDPOINT_URL"] = endpoint
            for name, value in {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}.items():
                os.environ.setdefault(name, value)
        os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
        # URLs name "localhost" (the servers listen on 127.0.0.1): browsers refuse an IP address as the
        # WebAuthn relying-party ID, and the RP ID is the identity service's host.
        url_host = "localhost" if self.host == "127.0.0.1" else self.host
        for group, var in URL_VARS.items():
            os.environ[var] = f"http://{url_host}:{self.ports[group]}"
        os.environ["MAIL_OUTBOX_DIR"] = str(self.state_dir / "outbox")
        os.environ.setdefault("STAGE", "local")
        from chalicelib.core.config import settings

        settings.cache_clear()
        return endpoint

    def _serve(self) -> None:
        from chalice.config import Config
        from chalice.local import LocalDevServer

        from chalicelib.groups import HTTP_GROUPS, create_app

        for group in HTTP_GROUPS:
            app = create_app(group)
            config = Config.create(chalice_app=app, app_name=f"aiplat-{group}", chalice_stage="local",
                                   project_dir=str(Path(__file__).resolve().parent.parent))
            server = LocalDevServer(app, config, self.host, self.ports[group], handler_cls=_request_handler())
            thread = threading.Thread(target=server.server.serve_forever, name=f"http-{group}", daemon=True)
            thread.start()
            self._servers.append(server)
            self._threads.append(thread)

    def start(self) -> dict[str, Any]:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        endpoint = self._environment()
        from infra.bootstrap import bootstrap_all
        from infra.seed import seed_demo

        bootstrap_all()
        demo = seed_demo()
        self._serve()
        for thread in (WorkerLoop(self.stop_event), Scheduler(self.stop_event)):
            thread.start()
            self._threads.append(thread)
        info = {
            "urls": {"platform": os.environ["BASE_URL"] + "/v1", "gateway": os.environ["GATEWAY_URL"],
                     "identity": os.environ["AUTH_URL"], "app": os.environ["APP_URL"], "aws_endpoint": endpoint},
            "demo": demo,
            "outbox": os.environ["MAIL_OUTBOX_DIR"],
            "pid": os.getpid(),
        }
        path = self.state_dir / "run.json"
        path.write_text(json.dumps(info, indent=2))
        path.chmod(0o600)
        return info

    def stop(self) -> None:
        self.stop_event.set()
        for server in self._servers:
            server.server.shutdown()
            server.server.server_close()
        if self._emulator is not None:
            self._emulator.stop()


def main() -> None:
    started = time.monotonic()
    platform = LocalPlatform()
    try:
        info = platform.start()
    except OSError as err:
        print(f"could not start: {err} (is another `make run` already running?)", file=sys.stderr)
        platform.stop()
        raise SystemExit(1) from None
    demo = info["demo"]
    print(f"\naiplat is running ({time.monotonic() - started:.1f}s)\n")
    for name, url in info["urls"].items():
        print(f"  {name:<13} {url}")
    print("\nDemo sign-in (also in .local/run.json):")
    for key in ("email", "password", "totp_secret", "workspace_id"):
        if demo.get(key):
            print(f"  {key:<13} {demo[key]}")
    print(f"  api_token     {str(demo.get('api_token', ''))[:24]}... (full value in run.json)")
    print(f"\nE-mail outbox (sign-in codes, reset links, invitations): {info['outbox']}")
    token_cmd = f"python3 -c 'import json; print(json.load(open(\"{platform.state_dir}/run.json\"))[\"demo\"][\"api_token\"])'"
    print(f"Try: curl -s -H \"Authorization: Bearer $({token_cmd})\" {info['urls']['platform']}/me"
          "\n\nCtrl-C stops everything.", flush=True)
    done = threading.Event()
    # explicit handlers: a SIGINT inherited as ignored (started in the background) must still stop us
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    while not done.wait(0.5):
        pass
    print("\nstopping...", flush=True)
    platform.stop()


if __name__ == "__main__":
    main()
