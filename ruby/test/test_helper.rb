# frozen_string_literal: true

$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "minitest/autorun"
require "securerandom"
require "tmpdir"
require "onceonly"
require "onceonly/stores/sqlite"

Onceonly.logger.level = Logger::ERROR unless ENV["ONCEONLY_LOG"]

# Debian's mysql2 0.5.3 calls a C function Ruby 3.1 deprecates, and minitest
# turns deprecation warnings on: one line per statement prepared. Not ours to fix.
module QuietMysql2Deprecation
  def warn(message, *rest, **kw)
    super unless message.include?("rb_tainted_str_new_cstr")
  end
end
Warning.singleton_class.prepend(QuietMysql2Deprecation)
REPO_ROOT = File.expand_path("../..", __dir__)

# Test helpers, once: a fresh database per test, servers that must be up
# under CI=true, and the Rust CLI's binary. Every test that needs a server
# asks need_postgres! / need_mysql! (or a store below) or need_server!, and
# each decides through unavailable!, the one rule.
module Support
  PG_URL = ENV.fetch("ONCEONLY_TEST_PG", "postgres://postgres@127.0.0.1:5432/test")
  MYSQL_URL = ENV.fetch("ONCEONLY_TEST_MYSQL", "mysql://root@127.0.0.1:3306/test")

  module_function

  def ci?
    ENV["CI"] == "true"
  end

  # Skips with a loud message outside CI; fails under CI=true.
  def unavailable!(test, what)
    raise "#{what} is unreachable, and CI=true: failing, not skipping" if ci?

    warn "\n!!! SKIPPED #{test.name}: #{what} is unreachable (outside CI a test may skip; under CI=true it fails) !!!"
    test.skip("#{what} unreachable")
  end

  # Runs the block, a probe of the server `what` names (a PING, a
  # FLUSHDB); when it raises, the server is unavailable!.
  def need_server!(test, what)
    yield
  rescue StandardError => e
    unavailable!(test, "#{what} (#{e.class}: #{e.message.lines.first&.strip})")
  end

  # The tests' PostgreSQL answers, or unavailable!.
  def need_postgres!(test)
    unavailable!(test, "PostgreSQL at #{PG_URL}") unless pg_up?
  end

  # The tests' MySQL/MariaDB answers, or unavailable!.
  def need_mysql!(test)
    unavailable!(test, "MySQL/MariaDB at #{MYSQL_URL}") unless mysql_up?
  end

  def pg_up?
    return @pg_up unless @pg_up.nil?

    require "pg"
    PG.connect(PG_URL).close
    @pg_up = true
  rescue LoadError, StandardError
    @pg_up = false
  end

  # Runs `sql` on the tests' PostgreSQL database.
  def pg_admin(sql, url: PG_URL)
    conn = PG.connect(url)
    conn.exec("SET client_min_messages TO warning")
    conn.exec(sql)
  ensure
    conn&.close
  end

  def mysql_up?
    return @mysql_up unless @mysql_up.nil?

    mysql_admin("SELECT 1")
    @mysql_up = true
  rescue LoadError, StandardError
    @mysql_up = false
  end

  # Runs `sql` on the tests' MySQL/MariaDB server (as the URL's user).
  def mysql_admin(sql, url: MYSQL_URL)
    require "onceonly/stores/mysql"
    conn = Mysql2::Client.new(**Onceonly::MysqlStore.client_options(url))
    conn.query(sql)
  ensure
    conn&.close
  end

  # The Rust CLI: $ONCEONLY_BIN, else the repository's target/debug/onceonly
  # (built when missing).
  def onceonly_bin
    return ENV["ONCEONLY_BIN"] if ENV["ONCEONLY_BIN"] && !ENV["ONCEONLY_BIN"].empty?

    bin = File.join(ENV.fetch("CARGO_TARGET_DIR", File.join(REPO_ROOT, "target")), "debug", "onceonly")
    unless File.executable?(bin)
      system("cargo", "build", "-q", "-p", "onceonly-cli", chdir: REPO_ROOT) or raise "cargo build -p onceonly-cli failed"
    end
    bin
  end
end

# A fresh store per test: a SQLite file in a temporary directory, a
# PostgreSQL schema or a MySQL database of its own (dropped after the test).
module FreshStores
  def setup
    super
    @cleanups = []
  end

  def teardown
    @cleanups.reverse_each(&:call)
    super
  end

  def sqlite_store
    dir = Dir.mktmpdir("onceonly-rb")
    @cleanups << -> { FileUtils.rm_rf(dir) }
    store = Onceonly.connect("sqlite://#{dir}/ops.db")
    store.migrate
    store
  end

  def pg_store
    Support.need_postgres!(self)
    require "onceonly/stores/postgres"
    schema = "rb_#{SecureRandom.hex(5)}"
    store = Onceonly.connect(Support::PG_URL, schema: schema)
    @cleanups << -> { Support.pg_admin(%(DROP SCHEMA IF EXISTS "#{schema}" CASCADE)) }
    store.migrate
    store
  end

  # A fresh MySQL/MariaDB database (dropped after the test): its URL.
  def mysql_database_url(prefix: "mysql_ruby")
    Support.need_mysql!(self)
    name = "#{prefix}_#{SecureRandom.hex(5)}"
    Support.mysql_admin("CREATE DATABASE `#{name}`")
    @cleanups << -> { Support.mysql_admin("DROP DATABASE IF EXISTS `#{name}`") }
    Support::MYSQL_URL.sub(%r{/[^/?]*(\?|\z)}, "/#{name}\\1")
  end

  def mysql_store(**options)
    store = Onceonly.connect(mysql_database_url, **options)
    store.migrate
    store
  end

  # A fresh PostgreSQL database (the Rust CLI always uses the schema `onceonly`).
  def pg_database_url
    Support.need_postgres!(self)
    name = "rb_#{SecureRandom.hex(5)}"
    Support.pg_admin(%(CREATE DATABASE "#{name}"))
    @cleanups << -> { Support.pg_admin(%(DROP DATABASE IF EXISTS "#{name}" WITH (FORCE))) }
    Support::PG_URL.sub(%r{/[^/]*\z}, "/#{name}")
  end
end
