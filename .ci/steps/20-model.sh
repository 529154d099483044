#!/usr/bin/env bash
# The protocol model-checked (crates/onceonly-model) for every effect kind
# and policy: workers that crash at any step and lose their lease, the
# relay's stale sweep and shutdown release, a cancel, a resolve. Two bounds:
# 2 workers with 3 deliveries, and 3 workers with 1 delivery (the others
# race on the stale sweep). Prints the states explored; fails on any broken
# property. Then each planted bug, on a keyed destination: the checker must
# report it broken (exit 1), with the steps that break it. Release build:
# the debug one checks ~10x slower.
set -euo pipefail

cargo build --release -p onceonly-model
model="${CARGO_TARGET_DIR:-target}/release/onceonly-model"
"$model" --workers 2 --deliveries 3 --crashes 1
"$model" --workers 3 --deliveries 1 --crashes 1
for bug in release-ignores-cancel complete-ignores-token cancel-skips-lookup; do
  if "$model" --bug "$bug" --kind keyed --deliveries 2 --expiries 1; then
    echo "planted bug $bug was not found" >&2
    exit 1
  fi
done
echo "every planted bug was found"
