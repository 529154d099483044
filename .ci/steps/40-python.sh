#!/usr/bin/env bash
# The Python client (python/, issue #12): its pytest suite (shared corpus,
# the SQLite, PostgreSQL and MySQL stores, local effects, the Rust CLI on
# Python records and back, Celery through a real worker, Django on all three
# databases), then the replay through real Celery workers on RabbitMQ (every
# scenario: plain Celery on PostgreSQL, inside a Django project on MariaDB;
# the local effect through Django on PostgreSQL) and Redis (duplicates and
# concurrency, SQLite). Servers come from 00-services; with CI=true an
# unreachable one fails.
set -euo pipefail

# mysqlclient (the [test] extra; Django's MySQL backend) builds against
# MariaDB's client library: Debian's headers and pkg-config.
packages=(libmariadb-dev pkg-config)
missing=()
for p in "${packages[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p"); done
if ((${#missing[@]})); then
  flock /tmp/onceonly-ci-apt.lock apt-get update -qq
  DEBIAN_FRONTEND=noninteractive flock /tmp/onceonly-ci-apt.lock apt-get install -y -qq "${missing[@]}" >/dev/null
fi

venv=.venv/python
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
# Installs from PyPI the first time; a no-op check after that.
stamp="$venv/.installed-$(sha256sum python/pyproject.toml | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q -e "./python[test]"
  touch "$stamp"
fi

python3 tools/sync-sql --check

# The cross-language tests drive the CLI this checkout builds: $ONCEONLY_BIN
# (.ci/run sets it), else this checkout's build.
if [[ -z "${ONCEONLY_BIN:-}" ]]; then
  cargo build -q -p onceonly-cli
  target_dir="${CARGO_TARGET_DIR:-target}"
  case "$target_dir" in /*) ;; *) target_dir="$PWD/$target_dir" ;; esac
  export ONCEONLY_BIN="$target_dir/debug/onceonly"
fi

# Servers must answer under CI (the tests fail, not skip, when they do not).
mysql -h 127.0.0.1 -u root -e 'SELECT 1' >/dev/null

(cd python && "../$venv/bin/python" -m pytest -q -p no:cacheprovider)

# The replay through real Celery workers. Fewer concurrent runs than the
# documented 100 to keep CI short; docs/celery.md shows the full run.
db="onceonly_py_ci_$$"
reports=$(mktemp -d)
psql -h 127.0.0.1 -U postgres -d postgres -qc "CREATE DATABASE $db"
trap 'psql -h 127.0.0.1 -U postgres -d postgres -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)"' EXIT
"$venv/bin/python" -m onceonly.replay --queue celery --broker amqp://guest:guest@127.0.0.1:5672// \
  --db "postgresql://postgres@127.0.0.1:5432/$db" --runs 20 --json "$reports/rabbitmq.json"
# Every scenario again on MariaDB, the workers inside a Django project
# (onceonly.django, its settings, the local effect's rows by the ORM in
# transaction.atomic()). It replaced the plain Celery replay on MariaDB: the
# non-local kinds run the same onceonly.celery path on the same MySQL store,
# and raw PyMySQL local effects are in pytest (test_mysql.py).
mydb="django_replay_ci_$$"
djdb="django_replay_pg_ci_$$"
mysql -h 127.0.0.1 -u root -e "CREATE DATABASE $mydb"
psql -h 127.0.0.1 -U postgres -d postgres -qc "CREATE DATABASE $djdb"
trap 'psql -h 127.0.0.1 -U postgres -d postgres -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)"; psql -h 127.0.0.1 -U postgres -d postgres -qc "DROP DATABASE IF EXISTS $djdb WITH (FORCE)"; mysql -h 127.0.0.1 -u root -e "DROP DATABASE IF EXISTS $mydb"' EXIT
"$venv/bin/python" -m onceonly.replay --queue celery --framework django --broker amqp://guest:guest@127.0.0.1:5672// \
  --db "mysql://root@127.0.0.1:3306/$mydb" --runs 20 --json "$reports/rabbitmq-django-mysql.json"
# And on PostgreSQL the kind where Django differs: the local effect, on Django's
# psycopg connection (the other kinds ran on PostgreSQL above). docs/django.md
# shows every scenario on both.
"$venv/bin/python" -m onceonly.replay --queue celery --framework django --broker amqp://guest:guest@127.0.0.1:5672// \
  --db "postgresql://postgres@127.0.0.1:5432/$djdb" --kinds local --runs 20 --json "$reports/rabbitmq-django-pg.json"
"$venv/bin/python" -m onceonly.replay --queue celery --broker redis://127.0.0.1:6379/14 \
  --scenarios repeat,concurrent --runs 20 --json "$reports/redis.json"
