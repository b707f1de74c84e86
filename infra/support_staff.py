"""`make support-staff ARGS='add kim@example.com --name "Kim" --by you@example.com'`: the support staff
command (``chalicelib/platform/support/cli.py``) pointed like every operator command
(``infra/local_target.py``)."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from infra.local_target import configure

    configure()
    from chalicelib.platform.support import cli as support_cli

    return support_cli.main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
