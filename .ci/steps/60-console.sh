#!/usr/bin/env bash
# The operator console: its HTTP-level tests (SQLite and PostgreSQL) and its
# tests in a real headless Chromium (Debian's chromium + chromium-driver,
# driven through chromedriver). Installs the browser when it is missing.
set -euo pipefail

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi
chromium --version
chromedriver --version

# The browser tests fail (never skip) under CI=true when Chromium is
# missing, and the PostgreSQL ones when the server is unreachable.
cargo test -p onceonly-console
