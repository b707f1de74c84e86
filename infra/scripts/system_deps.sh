#!/usr/bin/env bash
# Installs the non-Python packages the tests need, only when they are missing:
# Debian's Chromium (real-browser tests) and the npm packages of the test peers.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "installing Debian's chromium (browser tests)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

for dir in tests/integration/peers/*/; do
  [ -f "$dir/package.json" ] || continue
  if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules" ]; then
    echo "installing npm packages in $dir"
    (cd "$dir" && npm ci --silent --no-audit --no-fund)
    touch "$dir/node_modules"
  fi
done
