#!/usr/bin/env bash
# The seed's kill -9 test, on the guarded SendOutbox: submit one item, kill
# the worker with SIGKILL after it sent and before it recorded, start a
# worker again, and look at what it decided. A pass: the gateway received
# the item exactly once, and the record is held for a person to check (the
# gateway can neither dedup nor be asked), never sent a second time.
#
#   php/examples/outbox/kill-9-test.sh      (MariaDB/MySQL on 127.0.0.1, Redis on 6379)
#
# Short timings so it runs in seconds: queue:work --timeout=4, the lease 6 s,
# retry_after 8 s (the seed's 600/900/900 keep the same order). Env:
# DB_DATABASE (default outbox_example; created), REDIS_DB (3), MYSQL (mysql -h127.0.0.1 -uroot).
set -euo pipefail
cd "$(dirname "$0")"
export DB_DATABASE=${DB_DATABASE:-outbox_example} REDIS_DB=${REDIS_DB:-3}
export REDIS_PREFIX="outbox-example-$$:" QUEUE_RETRY_AFTER=8 OUTBOX_LEASE=6
export GATEWAY_LOG=$(mktemp) APP_STORAGE=$(mktemp -d)
MYSQL=${MYSQL:-mysql -h127.0.0.1 -uroot}
WORKER_LOG=$APP_STORAGE/worker.log
worker() { php artisan queue:work redis --timeout=4 --tries=3 --sleep=1 >>"$WORKER_LOG" 2>&1 & echo $!; }
cleanup() { kill -9 $(jobs -p) 2>/dev/null || true; }
trap cleanup EXIT

$MYSQL -e "DROP DATABASE IF EXISTS \`$DB_DATABASE\`; CREATE DATABASE \`$DB_DATABASE\`"
php artisan outbox setup >/dev/null
id=$(GATEWAY_DELAY_MS=0 php artisan outbox add "+66-800-000-000" "your order has shipped")
echo "queued outbox item $id"

GATEWAY_DELAY_MS=30000 worker >"$APP_STORAGE/pid"
pid=$(cat "$APP_STORAGE/pid")
for _ in $(seq 100); do [ -s "$GATEWAY_LOG" ] && break; sleep 0.1; done
kill -9 "$pid"
echo "killed worker $pid after it sent:"
cat "$GATEWAY_LOG"
$MYSQL "$DB_DATABASE" -e "SELECT op_key, state, token, owner, external_ref FROM onceonly_ops\G"

worker >/dev/null
echo "a new worker; the job comes back after retry_after (8s), the claim's lease (6s) runs out..."
for _ in $(seq 300); do
  state=$($MYSQL -N "$DB_DATABASE" -e "SELECT state FROM onceonly_ops WHERE op_key = 'outbox-$id'")
  [ "$state" != claimed ] && break
  sleep 0.1
done
$MYSQL "$DB_DATABASE" -e "SELECT op_key, state, token, attempts, error FROM onceonly_ops\G"
php artisan onceonly:held

sends=$(grep -c '"key"' "$GATEWAY_LOG")
if [ "$state" = held ] && [ "$sends" = 1 ]; then
  echo "PASS: sent once, held for a person (onceonly resolve --job send_outbox --key outbox-$id --as completed|queued ...)"
else
  echo "FAIL: state $state after $sends sends"; cat "$WORKER_LOG"; exit 1
fi
