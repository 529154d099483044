#!/usr/bin/env bash
# HTTPS destinations (docs/destinations.md): the replay scenarios and the
# relay's crash tests again, with the test destination served over TLS by a
# CA made for this run. TestServer::start serves https:// when
# ONCEONLY_TEST_TLS_CERT/KEY name a certificate and key; every client (the
# harness, the worker processes, `onceonly run`) trusts the CA through
# SSL_CERT_FILE, which rustls-native-certs reads in place of the system's
# store. The plain-HTTP runs are in 10-rust.
set -euo pipefail

dir="$PWD/target/ci-https"
rm -rf "$dir"
cargo run -q -p onceonly-http --example test_ca -- "$dir" >/dev/null
export ONCEONLY_TEST_TLS_CERT="$dir/server.pem"
export ONCEONLY_TEST_TLS_KEY="$dir/server.key"
export SSL_CERT_FILE="$dir/ca.pem"

# The switch itself (fails if the destination stayed on plain HTTP).
cargo test -q -p onceonly-http --test https
# The replay scenarios and SIGKILL tests, and the CLI relay's crash tests.
cargo test -q -p onceonly-replay
cargo test -q -p onceonly-cli --test relay
# The `onceonly replay` command end to end.
cargo build -q -p onceonly-cli
target/debug/onceonly --db "sqlite://$dir/replay.db" replay
