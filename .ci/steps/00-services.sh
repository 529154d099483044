#!/usr/bin/env bash
# The servers the tests use. The machine starts them before a session; start
# any that is not answering (the same commands the machine uses).
set -euo pipefail

if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
# The tests' PostgreSQL database.
psql -h 127.0.0.1 -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'test'" | grep -q 1 \
  || psql -h 127.0.0.1 -U postgres -d postgres -c "CREATE DATABASE test"

if ! (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null; then
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
fi
if ! (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; then
  rabbitmq-server -detached
  for _ in $(seq 1 60); do (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null && break; sleep 1; done
fi
if ! (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null; then
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
    -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  for _ in $(seq 1 30); do (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null && break; sleep 1; done
fi
if ! (exec 3<>/dev/tcp/127.0.0.1/3306) 2>/dev/null; then
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
  for _ in $(seq 1 30); do (exec 3<>/dev/tcp/127.0.0.1/3306) 2>/dev/null && break; sleep 1; done
fi
# The tests' MariaDB database (ONCEONLY_TEST_MYSQL's default).
mysql -h 127.0.0.1 -u root -e "CREATE DATABASE IF NOT EXISTS test"
