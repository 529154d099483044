#!/usr/bin/env bash
# The operator console: its HTTP-level tests (SQLite and PostgreSQL) and its
# tests in a real headless Chromium (Debian's chromium + chromium-driver,
# driven through chromedriver). Installs the browser when it is missing.
set -euo pipefail

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  flock /tmp/onceonly-ci-apt.lock apt-get update -qq
  DEBIAN_FRONTEND=noninteractive flock /tmp/onceonly-ci-apt.lock apt-get install -y -qq chromium chromium-driver >/dev/null
fi
chromium --version
chromedriver --version

# The browser test is ignored in the workspace's run (CI starts that before
# this step installs the browser); here it runs, and under CI=true it fails
# (never skips) when Chromium is missing, as the PostgreSQL tests do when
# the server is unreachable.
cargo test -p onceonly-console -- --include-ignored
