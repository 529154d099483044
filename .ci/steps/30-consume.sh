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
        flock /tmp/onceonly-ci-apt.lock apt-get update
        flock /tmp/onceonly-ci-apt.lock apt-get install -y python3-venv
    fi
    python3 -m venv .venv/consume
    .venv/consume/bin/pip install --quiet 'moto[server]'
fi
export ONCEONLY_MOTO_SERVER="$PWD/.venv/consume/bin/moto_server"

# One package selection and one feature list for every cargo command, so
# the dependencies' features unify the same way each time and the test
# build compiles each crate once (two `cargo test` with different package
# sets used to build parts of the tree twice). Clippy's check build cannot
# be shared with the test build (metadata only, no code).
packages=(-p onceonly-consume -p onceonly-cli)
features=onceonly-consume/sqs,onceonly-consume/nats,onceonly-cli/sqs,onceonly-cli/nats
cargo clippy "${packages[@]}" --all-targets --features "$features" -- -D warnings
# onceonly-consume's unit and broker tests, the CLI's consume/replay tests
# (the replay runs its concurrent scenario in consumer processes, on
# JetStream and on moto, with a small --runs), then the crate's doc test.
# The two replays spend their minutes waiting for the brokers' redelivery
# timeouts, so the JetStream and the SQS halves run side by side (built
# once first; each half's output is printed when it ends).
tests=(--lib --test nats --test sqs --test consume_nats --test consume_sqs)
cargo test "${packages[@]}" --features "$features" "${tests[@]}" --no-run
logs=$(mktemp -d)
cargo test "${packages[@]}" --features "$features" --lib --test nats --test consume_nats \
    >"$logs/nats.log" 2>&1 &
nats=$!
cargo test "${packages[@]}" --features "$features" --test sqs --test consume_sqs \
    >"$logs/sqs.log" 2>&1 &
sqs=$!
status=0
wait "$nats" || status=$?
cat "$logs/nats.log"
wait "$sqs" || status=$?
cat "$logs/sqs.log"
if [ "$status" -ne 0 ]; then
    echo "30-consume: a consume test failed (output above)"
    exit "$status"
fi
cargo test "${packages[@]}" --features "$features" --doc

echo "30-consume: $(( $(date +%s) - started ))s"
