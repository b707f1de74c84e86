"""`make dead-letters` (``ARGS='list'`` or ``ARGS='peek sync-jobs --region eu-central-1'``): the dead-letter
queue command (``chalicelib/platform/support/dead_letters_cli.py``) pointed like every operator command
(``infra/local_target.py``)."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from infra.local_target import configure

    configure()
    from chalicelib.platform.support import dead_letters_cli

    return dead_letters_cli.main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
