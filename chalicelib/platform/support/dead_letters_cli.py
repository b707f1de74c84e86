"""Operator command: the dead-letter queues of a deployment (``docs/operations.md``, "Dead-letter queues").

    python -m chalicelib.platform.support.dead_letters_cli list [--region R ...]
    python -m chalicelib.platform.support.dead_letters_cli peek <queue> [--region R] [--limit N]

Prints JSON on stdout; exit status 0 when every dead-letter queue is empty (``list``) or on success
(``peek``), 1 when a ``list`` finds messages waiting, 2 on usage errors. Uses the platform's AWS settings
(``AWS_PROFILE``, ``AWS_ENDPOINT_URL``); `make dead-letters` points it at `make run`'s emulator.
"""
from __future__ import annotations

import argparse
import json
import sys

from chalicelib.core.regions import OPEN_REGIONS
from chalicelib.platform.support import dead_letters


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dead_letters", description="Dead-letter queues of a deployment.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_list = sub.add_parser("list", help="messages waiting in every dead-letter queue, per region")
    p_list.add_argument("--region", action="append", choices=OPEN_REGIONS)
    p_peek = sub.add_parser("peek", help="summaries of a dead-letter queue's messages (ids, not bodies)")
    p_peek.add_argument("queue", help="the queue whose dead-letter queue to read, e.g. sync-jobs")
    p_peek.add_argument("--region", default=OPEN_REGIONS[0], choices=OPEN_REGIONS)
    p_peek.add_argument("--limit", type=int, default=dead_letters.PEEK_LIMIT)
    args = parser.parse_args(argv)
    if args.command == "list":
        out = dead_letters.overview(args.region or OPEN_REGIONS)
        print(json.dumps(out, indent=2))
        return 1 if any(r["messages"] for r in out["regions"].values()) else 0
    try:
        print(json.dumps(dead_letters.peek(args.region, args.queue, args.limit), indent=2))
    except ValueError as err:
        print(str(err), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
