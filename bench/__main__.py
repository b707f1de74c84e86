"""`make bench`: runs every bench/bench_*.py module's ``main()``; each prints its tables."""
from __future__ import annotations

import importlib
import logging
import pkgutil
import sys

import bench
from chalicelib.core import clock


def main() -> None:
    logging.getLogger("aiplat-svc").setLevel(logging.WARNING)  # no access-log lines between the tables
    only = sys.argv[1:]
    for mod in sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("bench_")):
        if only and not any(o in mod for o in only):
            continue
        print(f"## {mod}\n", flush=True)
        importlib.import_module(f"bench.{mod}").main()
        clock.reset()  # a benchmark may move the platform clock; the next one starts from real time


if __name__ == "__main__":
    main()
