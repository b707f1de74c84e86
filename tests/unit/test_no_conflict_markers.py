"""No file the repository tracks holds a merge's conflict markers (a page with them fails only in a browser)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(rb"^(<{7} |>{7} |={7}$)", re.M)
TEXT = (".py", ".js", ".css", ".html", ".md", ".yaml", ".yml", ".toml", ".json", ".txt", ".sh", ".cfg", ".ini")


def test_no_tracked_file_holds_conflict_markers() -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    found = [name.decode() for name in files if name.decode().endswith(TEXT) and "node_modules" not in name.decode()
             and (ROOT / name.decode()).is_file() and MARKER.search((ROOT / name.decode()).read_bytes())]
    assert found == [], "resolve the merge in these files"
