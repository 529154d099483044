#!/usr/bin/env bash
# The PHP client (php/, issue #27): Debian's PHP, Laravel and PHPUnit (the
# PHP package registry is not reachable), the SQL copies, the PHPUnit suite
# (shared corpus, every case of protocol/decisions.json, the three PDO
# stores with MySQL in both counting modes, the guard on each, the Rust CLI
# on the same MariaDB and SQLite records, real `queue:work` workers on
# Redis with a SIGKILL), composer's autoloader, and the example's kill -9
# script, and the replay through queue:work workers on MariaDB and
# PostgreSQL. Redis DB 11 (CI's); MariaDB databases laravel_*.
set -euo pipefail

packages=(php8.2-cli php-laravel-framework php-redis php8.2-mysql php8.2-pgsql php8.2-sqlite3 phpunit composer mariadb-client)
missing=()
for p in "${packages[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p"); done
if ((${#missing[@]})); then
  flock /tmp/onceonly-ci-apt.lock apt-get update -qq
  DEBIAN_FRONTEND=noninteractive flock /tmp/onceonly-ci-apt.lock apt-get install -y -qq "${missing[@]}" >/dev/null
fi
php -v | head -1

tools/sync-sql --check

if [[ -z "${ONCEONLY_BIN:-}" ]]; then
  export ONCEONLY_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/onceonly"
  [[ -x "$ONCEONLY_BIN" ]] || cargo build -q -p onceonly-cli
fi

# Servers must answer under CI (the tests fail, not skip, when they do not).
mysql -h127.0.0.1 -uroot -e 'SELECT 1' >/dev/null
pg_isready -q -h 127.0.0.1 -p 5432
redis-cli -h 127.0.0.1 ping | grep -q PONG

export ONCEONLY_TEST_REDIS_DB=11
(cd php && phpunit)

# composer's autoloader (offline) loads the same classes as autoload.php.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -r php/composer.json php/src php/sql "$tmp/"
(cd "$tmp" && COMPOSER_ALLOW_SUPERUSER=1 composer dump-autoload -q --no-interaction && php -r '
  require "vendor/autoload.php";
  $p = Onceonly\Payload::parse("{\"b\":1,\"a\":2}");
  if ($p->json !== "{\"a\":2,\"b\":1}") { fwrite(STDERR, "composer autoload: $p->json\n"); exit(1); }
  echo "composer autoload: the package loads\n";')

DB_DATABASE=laravel_outbox_ci REDIS_DB=11 php/examples/outbox/kill-9-test.sh

# The replay through real queue:work workers (docs/laravel.md), on MariaDB and PostgreSQL.
php php/replay/replay.php --db mysql --runs 3 --json "$tmp/replay-laravel-mysql.json"
php php/replay/replay.php --db pgsql --runs 3 --json "$tmp/replay-laravel-pgsql.json"
