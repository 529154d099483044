#!/usr/bin/env bash
# The protocol model-checked (crates/onceonly-model): every effect kind and
# policy, 2 workers, 3 deliveries, a crash at any step, lease expiry, a
# cancel, a resolve, a relay shutdown. Prints the states explored; fails on
# any broken property. Release build: the debug one checks ~10x slower.
set -euo pipefail

cargo build --release -p onceonly-model
"${CARGO_TARGET_DIR:-target}/release/onceonly-model" --workers 2 --deliveries 3 --crashes 1
