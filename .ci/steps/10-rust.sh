#!/usr/bin/env bash
# Formatting, lints, the README's test command, and the SQL copies the
# Python and Ruby clients ship.
set -euo pipefail

cargo fmt --check
cargo clippy --all-targets -- -D warnings
python3 tools/sync-sql --check

# The README's test command.
cargo test --workspace
