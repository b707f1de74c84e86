#!/usr/bin/env bash
# Installs the non-Python packages the tests need, only when they are missing: Debian's Chromium
# (real-browser tests), jq (the README's and docs' shell blocks pick ids out of answers with it) and the
# npm packages of the test peers.
set -euo pipefail
cd "$(dirname "$0")/../.."

MISSING=""
if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then MISSING="chromium"; fi
if ! command -v jq >/dev/null 2>&1; then MISSING="$MISSING jq"; fi
if [ -n "$MISSING" ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "installing Debian's$MISSING (browser tests, docs blocks)"
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086 # one word per package
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $MISSING >/dev/null
fi

for dir in tests/integration/peers/*/; do
  [ -f "$dir/package.json" ] || continue
  if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules" ]; then
    echo "installing npm packages in $dir"
    (cd "$dir" && npm ci --silent --no-audit --no-fund)
    touch "$dir/node_modules"
  fi
done
