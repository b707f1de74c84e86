"""`make plan-move WS=<workspace id> TO=<residency>` (``ARGS='--json'`` and the rate options): the
region-move planner (``chalicelib/residency/planner.py``, a dry run) pointed like every operator command
(``infra/local_target.py``)."""
from __future__ import annotations

import sys

USAGE = "usage: make plan-move WS=<workspace id> TO=<residency> [ARGS='--json --items-per-second N --mb-per-second N']"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 3 or not args[0] or not args[2]:  # make passes "$(WS)" --to "$(TO)" ...
        print(USAGE, file=sys.stderr)
        return 2
    from infra.local_target import configure

    configure()
    from chalicelib.residency import planner

    return planner.main(args)


if __name__ == "__main__":
    sys.exit(main())
