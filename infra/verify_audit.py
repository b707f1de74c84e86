"""`make verify-audit WS=<workspace id>` or `make verify-audit EXPORT=s3://...`: run the audit verifier
(``chalicelib/platform/audit/cli.py``) from a fresh clone.

Where it points: ``infra/local_target.py`` (``AWS_ENDPOINT_URL`` / ``AWS_PROFILE`` when set, otherwise
the emulator of a running `make run`). The report is JSON on stdout; exit 0 when everything verifies,
1 when anything fails, 2 on a usage error.
"""
from __future__ import annotations

import sys

USAGE = "usage: make verify-audit WS=<workspace id>  |  make verify-audit EXPORT=s3://<bucket>/exports/<ws>/<id>/"


def command(workspace: str, export: str) -> list[str] | None:
    """The verifier's arguments for ``WS`` / ``EXPORT`` (exactly one of them), or None."""
    if bool(workspace) == bool(export):
        return None
    return ["verify-export", export] if export else ["verify-live", workspace]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    workspace, export = (args + ["", ""])[:2]
    cli_args = command(workspace.strip(), export.strip())
    if cli_args is None:
        print(USAGE, file=sys.stderr)
        return 2
    from infra.local_target import configure

    configure()
    from chalicelib.platform.audit import cli as audit_cli

    return audit_cli.main(cli_args)


if __name__ == "__main__":
    sys.exit(main())
