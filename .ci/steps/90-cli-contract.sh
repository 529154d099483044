#!/usr/bin/env bash
# The command-line contract smoke test, when the shared tools lie beside the
# checkout (they do on the project's machines and in CI; a plain clone
# elsewhere runs without it, and says so).
set -euo pipefail

# The debug binary the tests just built: a release build would add minutes.
cargo build -p onceonly-cli
smoke=../shared/tools/cli-contract-smoke
if [ -f "$smoke" ]; then
  python3 "$smoke" "${CARGO_TARGET_DIR:-target}/debug/onceonly"
elif [ "${CI:-}" = true ] && [ -d ../shared ]; then
  echo "cli-contract-smoke missing from ../shared/tools" >&2
  exit 1
else
  echo "NOTE: ../shared/tools/cli-contract-smoke not beside this checkout; contract smoke test not run" >&2
fi
