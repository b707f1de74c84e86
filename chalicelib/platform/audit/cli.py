"""Audit verifier command.

    python -m chalicelib.platform.audit.cli verify-export s3://<bucket>/exports/<ws>/<export_id>/
    python -m chalicelib.platform.audit.cli verify-live <workspace_id>

Prints a JSON report; exit status 0 when everything verifies, 1 when anything fails, 2 on usage errors.
Uses the same AWS credentials/endpoint settings as the platform (``AWS_ENDPOINT_URL`` for LocalStack).
"""
from __future__ import annotations

import argparse
import json
import logging
import sys

from chalicelib.core.http.errors import ApiError
from chalicelib.core.tenancy import workspace_scope
from chalicelib.platform.audit import export as audit_export


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="audit_cli", description="Verify audit exports and live chains.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_exp = sub.add_parser("verify-export", help="verify an export in the audit-archive bucket")
    p_exp.add_argument("uri")
    p_live = sub.add_parser("verify-live", help="verify a workspace's live audit chain")
    p_live.add_argument("workspace_id")
    args = parser.parse_args(argv)
    # stdout carries only the report (pipe it to jq); structured logs go to stderr while the command runs
    handlers = [h for h in logging.getLogger("aiplat").handlers
                if isinstance(h, logging.StreamHandler) and not getattr(h.stream, "closed", False)]
    previous = [(h, h.setStream(sys.stderr)) for h in handlers]
    try:
        return _run(args)
    finally:
        for handler, stream in previous:
            if stream is not None:
                handler.setStream(stream)


def _run(args: argparse.Namespace) -> int:
    try:
        if args.command == "verify-export":
            report = audit_export.verify_export(args.uri)
        else:
            report = audit_export.verify_live(workspace_scope(args.workspace_id))
    except (ValueError, ApiError) as err:
        print(json.dumps({"ok": False, "problems": [str(err)]}))
        return 2
    print(json.dumps(report.as_dict(), indent=2))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
