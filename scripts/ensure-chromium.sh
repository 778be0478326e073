#!/usr/bin/env bash
# The browser tests (tests/web) drive Debian's Chromium. Install it when it is missing
# (as root, as CI runs); otherwise say the command to run.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || [ -n "${NIXXTEST_CHROMIUM:-}" ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's chromium for the browser tests (tests/web) ..." >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  exit 0
fi
echo "the browser tests need Chromium: run 'sudo apt-get install chromium' (or set NIXXTEST_CHROMIUM to a Chromium binary)" >&2
exit 1
