#!/usr/bin/env bash
# The SQS and NATS JetStream consumers (crates/onceonly-consume, `onceonly
# consume`, `check --sqs-queue-url/--nats-consumer`, `replay --queue`):
# clippy and the tests behind the cargo features `sqs` and `nats`, which the
# workspace's default `cargo test --workspace` (10-rust) does not enable.
# SQS runs on moto's emulator (PyPI moto[server], in .venv/consume; the
# tests start it on a free loopback port); NATS on the server 00-services
# starts on 127.0.0.1:4222. With CI=true an unreachable server fails a test.
set -euo pipefail

started=$(date +%s)

if [ ! -x .venv/consume/bin/moto_server ]; then
    if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then
        apt-get update
        apt-get install -y python3-venv
    fi
    python3 -m venv .venv/consume
    .venv/consume/bin/pip install --quiet 'moto[server]'
fi
export ONCEONLY_MOTO_SERVER="$PWD/.venv/consume/bin/moto_server"

features=onceonly-consume/sqs,onceonly-consume/nats,onceonly-cli/sqs,onceonly-cli/nats
cargo clippy -p onceonly-consume -p onceonly-cli --all-targets --features "$features" -- -D warnings
cargo test -p onceonly-consume --features sqs,nats
cargo test -p onceonly-cli --features sqs,nats --test consume_nats --test consume_sqs

echo "30-consume: $(( $(date +%s) - started ))s"
