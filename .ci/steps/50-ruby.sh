#!/usr/bin/env bash
# The Ruby client (ruby/, issue #13): Debian's Ruby and gems (the RubyGems
# registry is not reachable), the SQL copies, the minitest suite (shared
# corpus, the three stores, Sidekiq on Redis, cross-language with the Rust
# CLI), gem build + a local gem install, and the replay through real Sidekiq
# processes on SQLite, PostgreSQL and MariaDB (fewer concurrent runs than the
# 100 of docs/sidekiq.md, to keep the step short). The suite includes the
# Rails half of #24 (docs/rails.md): guarded ActiveJob jobs in process and
# through real `sidekiq -r` processes with SIGKILLs (active_job_test.rb,
# rails_sidekiq_test.rb), and the rails_shop example (rails_example_test.rb).
set -euo pipefail

packages=(ruby ruby-pg ruby-sqlite3 ruby-sidekiq ruby-redis ruby-json ruby-minitest ruby-connection-pool ruby-webrick ruby-activerecord ruby-mysql2
  ruby-rails ruby-activejob rake)
missing=()
for p in "${packages[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p"); done
if ((${#missing[@]})); then
  flock /tmp/onceonly-ci-apt.lock apt-get update -qq
  DEBIAN_FRONTEND=noninteractive flock /tmp/onceonly-ci-apt.lock apt-get install -y -qq "${missing[@]}" >/dev/null
fi
ruby -v

tools/sync-sql --check

# The Rust CLI for the cross-language tests: $ONCEONLY_BIN, else this checkout's build.
if [[ -z "${ONCEONLY_BIN:-}" ]]; then
  export ONCEONLY_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/onceonly"
  [[ -x "$ONCEONLY_BIN" ]] || cargo build -q -p onceonly-cli
fi

# The Python interop tests (ruby/test/python_interop_test.rb) run the Python
# client from the venv 40-python builds, with psycopg and PyMySQL in it.
[[ "${CI:-}" != true || -x .venv/python/bin/python ]] || { echo "no .venv/python: run .ci/steps/40-python.sh first" >&2; exit 1; }

# Servers must answer under CI (the tests fail, not skip, when they do not).
pg_isready -q -h 127.0.0.1 -p 5432
redis-cli -h 127.0.0.1 ping | grep -q PONG
mysqladmin -h 127.0.0.1 -u root --silent ping

(cd ruby && ruby -Ilib -Itest -e 'Dir["test/*_test.rb"].sort.each { |f| require File.expand_path(f) }')

# gem build and a local install, then the installed gem (not ruby/lib) on a fresh SQLite file.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd ruby && gem build -q onceonly.gemspec -o "$tmp/onceonly.gem" >/dev/null)
GEM_HOME="$tmp/gems" gem install -q --local --no-document "$tmp/onceonly.gem" >/dev/null
(cd "$tmp" && GEM_HOME="$tmp/gems" ruby -e '
  require "onceonly"
  abort "loaded from #{$LOADED_FEATURES.grep(/onceonly\.rb/).first}" unless $LOADED_FEATURES.grep(/onceonly\.rb\z/).first.start_with?(ENV["GEM_HOME"])
  store = Onceonly.connect("sqlite://gem.db"); store.migrate
  guard = Onceonly::Guard.new(store, Onceonly::JobSpec.new(job_type: "gem.check", effect: :keyed))
  out = guard.run("k", { "a" => 1 }) { "sent" }
  abort out.inspect unless out.result == "sent"
  puts "installed gem: migrate and a guarded run work"')
# The installed gem ships the MySQL SQL too: migrate and a guarded run on a fresh MariaDB database.
mysql -h 127.0.0.1 -u root -e "DROP DATABASE IF EXISTS onceonly_rb_gem; CREATE DATABASE onceonly_rb_gem"
(cd "$tmp" && GEM_HOME="$tmp/gems" ruby -e '
  require "onceonly"
  store = Onceonly.connect("mysql://root@127.0.0.1:3306/onceonly_rb_gem"); store.migrate
  abort "SQL not from the gem" unless Onceonly::SQL::DIR.start_with?(ENV["GEM_HOME"])
  guard = Onceonly::Guard.new(store, Onceonly::JobSpec.new(job_type: "gem.check", effect: :keyed))
  out = guard.run("k", { "a" => 1 }) { "sent" }
  abort out.inspect unless out.result == "sent"
  puts "installed gem on MariaDB: migrate and a guarded run work"')
mysql -h 127.0.0.1 -u root -e "DROP DATABASE onceonly_rb_gem"

ruby -Iruby/lib ruby/bin/onceonly-replay --queue sidekiq --redis redis://127.0.0.1:6379/12 --runs 20 \
  --json "$tmp/replay-sqlite.json"
psql -h 127.0.0.1 -U postgres -d postgres -qc "DROP DATABASE IF EXISTS onceonly_rb_replay WITH (FORCE)" \
  -c "CREATE DATABASE onceonly_rb_replay"
ruby -Iruby/lib ruby/bin/onceonly-replay --queue sidekiq --redis redis://127.0.0.1:6379/12 --runs 20 \
  --db postgres://postgres@127.0.0.1:5432/onceonly_rb_replay --json "$tmp/replay-postgres.json"
mysql -h 127.0.0.1 -u root -e "DROP DATABASE IF EXISTS onceonly_rb_replay; CREATE DATABASE onceonly_rb_replay"
ruby -Iruby/lib ruby/bin/onceonly-replay --queue sidekiq --redis redis://127.0.0.1:6379/12 --runs 20 \
  --db mysql://root@127.0.0.1:3306/onceonly_rb_replay --json "$tmp/replay-mysql.json"

# The same scenarios through ActiveJob jobs on the Sidekiq adapter (#24, docs/rails.md):
# local rows through an ActiveRecord model, on PostgreSQL and MariaDB, SIGKILLs counted.
psql -h 127.0.0.1 -U postgres -d postgres -qc "DROP DATABASE IF EXISTS onceonly_rb_aj_replay WITH (FORCE)" \
  -c "CREATE DATABASE onceonly_rb_aj_replay"
ruby -Iruby/lib ruby/bin/onceonly-replay --queue sidekiq --framework activejob --redis redis://127.0.0.1:6379/12 \
  --runs 20 --db postgres://postgres@127.0.0.1:5432/onceonly_rb_aj_replay --json "$tmp/replay-aj-postgres.json"
mysql -h 127.0.0.1 -u root -e "DROP DATABASE IF EXISTS onceonly_rb_aj_replay; CREATE DATABASE onceonly_rb_aj_replay"
ruby -Iruby/lib ruby/bin/onceonly-replay --queue sidekiq --framework activejob --redis redis://127.0.0.1:6379/12 \
  --runs 20 --db mysql://root@127.0.0.1:3306/onceonly_rb_aj_replay --json "$tmp/replay-aj-mysql.json"
