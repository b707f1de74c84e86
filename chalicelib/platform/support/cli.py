"""Operator command for provider support staff (``docs/operations.md``, "Support staff").

    python -m chalicelib.platform.support.cli add <email> --name "Sam Support" [--location US] --by <you>
    python -m chalicelib.platform.support.cli remove <email> --by <you>
    python -m chalicelib.platform.support.cli list [--all]
    python -m chalicelib.platform.support.cli history

Prints JSON on stdout; exit status 0 on success, 1 when the request cannot be done (unknown user, not
registered, a broken history chain), 2 on usage errors. Uses the platform's AWS settings
(``AWS_PROFILE``, ``AWS_ENDPOINT_URL``); `make support-staff` points it at `make run`'s emulator.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from chalicelib.platform.support import staff as support_staff


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="support_cli", description="Register provider support staff.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_add = sub.add_parser("add", help="register a directory user as support staff")
    p_add.add_argument("email")
    p_add.add_argument("--name", required=True)
    p_add.add_argument("--location", default="", help="where they work (shown to workspace Admins)")
    p_add.add_argument("--by", required=True, help="your name or e-mail (audited with your AWS principal)")
    p_rm = sub.add_parser("remove", help="end a person's support role (at once, whatever grants they hold)")
    p_rm.add_argument("email")
    p_rm.add_argument("--by", required=True)
    p_ls = sub.add_parser("list", help="registered support staff")
    p_ls.add_argument("--all", action="store_true", help="include removed staff")
    sub.add_parser("history", help="the audited changes, with the chain verified")
    return parser


def _run(args: argparse.Namespace) -> tuple[int, Any]:
    if args.command == "list":
        return 0, support_staff.list_staff(include_removed=args.all)
    if args.command == "history":
        out = support_staff.history()
        return (0 if out["ok"] else 1), out
    actor = support_staff.operator(args.by)
    if args.command == "add":
        return 0, support_staff.add(args.email, args.name, args.location, actor=actor)
    return 0, support_staff.remove(args.email, actor=actor)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # stdout carries only the JSON answer; logs go to stderr while the command runs
    handlers = [h for h in logging.getLogger("aiplat").handlers
                if isinstance(h, logging.StreamHandler) and not getattr(h.stream, "closed", False)]
    previous = [(h, h.setStream(sys.stderr)) for h in handlers]
    try:
        try:
            status, out = _run(args)
        except support_staff.StaffError as err:
            status, out = 1, {"ok": False, "problem": str(err)}
        print(json.dumps(out, indent=2, default=str))
        return status
    finally:
        for handler, stream in previous:
            if stream is not None:
                handler.setStream(stream)


if __name__ == "__main__":
    sys.exit(main())
