# frozen_string_literal: true

require_relative "test_helper"
require "onceonly/sidekiq"

# A guarded job pushed to a database nobody migrated yet: the push raises
# Onceonly::NotMigrated naming the command to run, not a raw SQL error, and
# nothing reaches Redis.
class NotMigratedTest < Minitest::Test
  include FreshStores

  REDIS = ENV.fetch("ONCEONLY_TEST_REDIS", "redis://127.0.0.1:6379/13")

  class EarlyPush
    include Sidekiq::Job
    include Onceonly::Sidekiq.guard(key: 0, effect: :keyed, lease: 10, timeout: 5)

    def perform(order_id) = order_id
  end

  def setup
    super
    Sidekiq.configure_client { |c| c.redis = { url: REDIS } }
    Support.need_server!(self, "Redis at #{REDIS}") { Sidekiq.redis(&:flushdb) }
  end

  def teardown
    Onceonly::Sidekiq.store = nil
    super
  end

  def unmigrated_sqlite
    dir = Dir.mktmpdir("onceonly-rb")
    @cleanups << -> { FileUtils.rm_rf(dir) }
    Onceonly.connect("sqlite://#{dir}/ops.db")
  end

  def unmigrated_pg
    Support.need_postgres!(self)
    require "onceonly/stores/postgres"
    schema = "rb_#{SecureRandom.hex(5)}"
    @cleanups << -> { Support.pg_admin(%(DROP SCHEMA IF EXISTS "#{schema}" CASCADE)) }
    Onceonly.connect(Support::PG_URL, schema: schema)
  end

  def assert_push_names_migrate(store)
    Onceonly::Sidekiq.store = store
    EarlyPush.instance_variable_set(:@onceonly_guard, nil) # the guard keeps the store it first met
    err = assert_raises(Onceonly::NotMigrated) { EarlyPush.perform_async("o-1") }
    assert_kind_of Onceonly::DatabaseError, err, "callers rescuing DatabaseError still catch it"
    assert_includes err.message, "onceonly tables do not exist"
    assert_includes err.message, "`onceonly --db URL migrate` or `Onceonly.migrate(url)`"
    assert_equal 0, Sidekiq.redis { |r| r.llen("queue:default") }, "nothing pushed"

    # A delivery (a job pushed before the guard was installed) says the same.
    assert_raises(Onceonly::NotMigrated) { EarlyPush.new.perform("o-2") }

    # After migrate the same push goes through.
    assert_operator store.migrate, :>, 0
    EarlyPush.perform_async("o-1")
    assert_equal "queued", store.op_get("NotMigratedTest.EarlyPush", "o-1").record.state
  end

  def test_sqlite_push_before_migrate_names_the_command
    assert_push_names_migrate(unmigrated_sqlite)
  end

  def test_postgres_push_before_migrate_names_the_command
    assert_push_names_migrate(unmigrated_pg)
  end

  def test_mysql_push_before_migrate_names_the_command
    assert_push_names_migrate(Onceonly.connect(mysql_database_url))
  end

  def test_onceonly_migrate_creates_the_tables_from_a_url
    dir = Dir.mktmpdir("onceonly-rb")
    @cleanups << -> { FileUtils.rm_rf(dir) }
    assert_operator Onceonly.migrate("sqlite://#{dir}/ops.db"), :>, 0
    assert_equal 0, Onceonly.migrate("sqlite://#{dir}/ops.db"), "idempotent"
  end

  def test_a_missing_table_of_the_users_own_stays_a_database_error
    store = pg_store
    ["no_such_table_here", %("#{store.schema}_reports")].each do |table|
      err = assert_raises(Onceonly::DatabaseError) { store.with_connection { |c| c.exec("SELECT * FROM #{table}") } }
      refute_kind_of Onceonly::NotMigrated, err, table
    end
  end

  def test_a_missing_table_of_the_users_own_stays_a_database_error_on_mysql
    store = mysql_store
    %w[no_such_table_here onceonly_reports].each do |table|
      err = assert_raises(Onceonly::DatabaseError) { store.send(:with_conn, nil) { |c| c.query("SELECT * FROM #{table}") } }
      refute_kind_of Onceonly::NotMigrated, err, table
    end
  end
end
