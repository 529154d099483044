# frozen_string_literal: true

require_relative "test_helper"
require "stringio"

begin
  require "active_record"
  require "active_job"
rescue LoadError
  nil
end
require "onceonly/active_job" if defined?(::ActiveJob)

# Onceonly::ActiveJob in this process (Debian's Rails 6.1, ActiveJob's test
# adapter, so what a job enqueues is seen), on SQLite and on a PostgreSQL
# and a MySQL/MariaDB database of the test's own: the outcomes and what ActiveJob does next, a
# local effect in ActiveRecord's transaction, the record at enqueue and after
# commit, the tables by an ActiveRecord migration, the timing check.
# Real Sidekiq processes: rails_sidekiq_test.rb.
module ActiveJobCases
  if defined?(::ActiveJob)
    class Receipt < ::ActiveRecord::Base
      self.table_name = "receipts"
    end

    class Purchase < ::ActiveRecord::Base
      self.table_name = "purchases"
      after_create_commit { LocalReceipt.perform_later(id) }
    end

    SENT = Hash.new(0)

    class TestJob < ::ActiveJob::Base
      include Onceonly::ActiveJob
      self.queue_adapter = :test
    end

    class LocalReceipt < TestJob
      guarded key: ->(purchase_id, _fail = false) { "purchase-#{purchase_id}" }, effect: :local

      def perform(purchase_id, fail = false)
        Receipt.create!(purchase_id: purchase_id)
        raise "card declined" if fail

        { "receipts" => Receipt.where(purchase_id: purchase_id).count, "key" => onceonly.idempotency_key }
      end
    end

    class KeyedMail < TestJob
      guarded key: 0, effect: :keyed, max_retries: 0, lease: "10s", timeout: "2s"

      def perform(order_id, outcome = "sent")
        SENT[onceonly.idempotency_key] += 1
        raise Onceonly::Effect::NotSent, "connection refused" if outcome == "not_sent"

        { "sent" => order_id }
      end
    end

    class HeldMail < TestJob
      guarded key: 0, effect: :opaque, on_stale: :hold

      def perform(order_id)
        SENT["held-#{order_id}"] += 1
        raise Onceonly::Effect::Unknown, "read timeout"
      end
    end
  end

  # The guarded job classes are registered only while these tests run: the
  # other suites' re-drive and timing checks must not meet them (their
  # ActiveRecord connection is gone after each test).
  def self.jobs
    @jobs ||= [LocalReceipt, KeyedMail, HeldMail].to_h { |k| [k.onceonly_config.spec.job_type, k] }
  end

  def setup
    super
    Support.unavailable!(self, "Rails (apt-get install ruby-rails ruby-activejob)") unless defined?(::ActiveJob)
    Onceonly::ActiveJob.registry.replace(ActiveJobCases.jobs)
    @log = StringIO.new
    @saved_logger = ::ActiveJob::Base.logger
    ::ActiveJob::Base.logger = Logger.new(@log)
    connect
    Onceonly::ActiveJob.store = nil
    [LocalReceipt, KeyedMail, HeldMail].each { |k| k.instance_variable_set(:@onceonly_guard, nil) }
    Onceonly::ActiveRecord.migrate
    conn = ::ActiveRecord::Base.connection
    conn.create_table(:receipts, force: true) { |t| t.integer :purchase_id }
    conn.create_table(:purchases, force: true) { |t| t.string :email }
    @store = Onceonly::ActiveJob.store
    SENT.clear
    TestJob.queue_adapter.enqueued_jobs.clear
  end

  def teardown
    Onceonly::ActiveJob.registry.clear if defined?(::ActiveJob)
    ::ActiveJob::Base.logger = @saved_logger if defined?(::ActiveJob)
    ::ActiveRecord::Base.remove_connection if defined?(::ActiveRecord) && ::ActiveRecord::Base.connected?
    super
  end

  def enqueued
    TestJob.queue_adapter.enqueued_jobs
  end

  def state(job_type, key)
    @store.op_get(job_type, key)&.record&.state
  end

  def test_a_local_job_commits_its_write_with_the_record_or_neither
    assert_equal({ "receipts" => 1, "key" => "ActiveJobCases.LocalReceipt:purchase-1" }, LocalReceipt.perform_now(1))
    LocalReceipt.perform_now(1)
    assert_equal 1, Receipt.where(purchase_id: 1).count, "a repeat writes nothing"
    assert_match(/ActiveJobCases.LocalReceipt:purchase-1 done \(a repeat/, @log.string)

    err = assert_raises(Onceonly::LocalEffectFailed) { LocalReceipt.perform_now(2, true) }
    assert_match(/card declined/, err.message)
    assert_equal 0, Receipt.where(purchase_id: 2).count, "the failed job's row rolled back with its claim"
    assert_nil @store.op_get("ActiveJobCases.LocalReceipt", "purchase-2")
  end

  def test_a_local_job_performed_inside_the_callers_transaction_is_undone_by_its_rollback
    ::ActiveRecord::Base.transaction do
      LocalReceipt.perform_now(3)
      raise ::ActiveRecord::Rollback
    end
    assert_equal 0, Receipt.where(purchase_id: 3).count
    assert_nil @store.op_get("ActiveJobCases.LocalReceipt", "purchase-3"), "the claim and completion rolled back too"
    LocalReceipt.perform_now(3)
    assert_equal ["completed", 1], [state("ActiveJobCases.LocalReceipt", "purchase-3"), Receipt.where(purchase_id: 3).count]
  end

  def test_a_keyed_job_acts_once_with_the_idempotency_key
    assert_equal({ "sent" => "a" }, KeyedMail.perform_now("a"))
    KeyedMail.perform_now("a")
    assert_equal({ "ActiveJobCases.KeyedMail:a" => 1 }, SENT)
    assert_empty enqueued, "a repeat enqueues nothing"
  end

  def test_a_not_sent_effect_goes_back_through_retry_job_after_its_backoff
    before = Time.now.to_f
    assert_nil KeyedMail.perform_now("b", "not_sent")
    assert_equal "queued", state("ActiveJobCases.KeyedMail", "b")
    assert_equal 1, enqueued.size, "retry_job enqueued the job again"
    job = enqueued.first
    assert_equal ["b", "not_sent"], job[:args]
    assert_operator job[:at], :>=, before + 1, "scheduled after the backoff (at least 1s), not at once"
    assert_operator job[:at], :<=, Time.now.to_f + 2
    assert_match(/enqueued again in 1s/, @log.string)
  end

  def test_retry_job_waits_for_the_releases_backoff_not_a_fixed_second
    KeyedMail.perform_now("b2", "not_sent")  # attempt 1: backoff 500ms
    @store.advance_clock(1000)
    KeyedMail.perform_now("b2", "not_sent")  # attempt 2: 1s
    @store.advance_clock(1500)
    before = Time.now.to_f
    KeyedMail.perform_now("b2", "not_sent")  # attempt 3: 2s
    assert_equal [2, 3], [enqueued.size - 1, @store.op_get("ActiveJobCases.KeyedMail", "b2").record.attempts]
    assert_operator enqueued.last[:at], :>=, before + 2, "the third release's backoff (2s), read back from the record"
    assert_match(/enqueued again in 2s/, @log.string)
  end

  def test_a_live_claim_elsewhere_is_left_to_its_owner
    payload = KeyedMail.onceonly_config.payload_for(["c"])
    kind, = @store.op_claim(job_type: "ActiveJobCases.KeyedMail", op_key: "c", fingerprint: payload.fingerprint,
                            payload: payload.json, owner: "other", lease_ms: 10_000)
    assert_equal :claimed, kind
    assert_nil KeyedMail.perform_now("c")
    assert_empty SENT
    assert_empty enqueued, "no retry loop against a live claim: its owner completes it, or the re-drive brings it back"
    assert_equal "claimed", state("ActiveJobCases.KeyedMail", "c")
    assert_match(/left to its owner/, @log.string)
  end

  def test_held_ends_the_job_with_a_log_line
    assert_nil HeldMail.perform_now("d")
    assert_equal "held", state("ActiveJobCases.HeldMail", "d")
    HeldMail.perform_now("d")
    assert_equal 1, SENT["held-d"], "held is not retried"
    assert_empty enqueued
    assert_match(/WARN -- : onceonly: ActiveJobCases.HeldMail:d is held for a person/, @log.string)
  end

  def test_the_record_is_written_queued_at_enqueue_and_a_bad_one_is_refused
    KeyedMail.perform_later("e")
    r = @store.op_get("ActiveJobCases.KeyedMail", "e").record
    assert_equal ["queued", '{"args":["e"]}'], [r.state, r.payload]
    assert_equal 1, enqueued.size

    assert_raises(Onceonly::PayloadMismatch) { KeyedMail.perform_later("e", "other") }
    assert_raises(Onceonly::InvalidInput) { KeyedMail.perform_later(" e") }
    assert_equal 1, enqueued.size, "a refused job is not enqueued"
  end

  def test_a_job_enqueued_after_commit_in_a_rolled_back_transaction_never_runs_nor_leaves_a_record
    rolled_back = nil
    ::ActiveRecord::Base.transaction do
      rolled_back = Purchase.create!(email: "bob@example.com")
      raise ::ActiveRecord::Rollback
    end
    assert_empty enqueued
    assert_nil @store.op_get("ActiveJobCases.LocalReceipt", "purchase-#{rolled_back.id}")

    committed = Purchase.create!(email: "ada@example.com")
    assert_equal [[committed.id]], enqueued.map { |j| j[:args] }
    assert_equal "queued", state("ActiveJobCases.LocalReceipt", "purchase-#{committed.id}")
  end

  def test_the_migration_is_the_stores_and_is_irreversible
    assert_equal 0, @store.migrate, "the migration's bookkeeping is the store's: nothing left to apply"
    assert_equal 0, Onceonly::ActiveRecord.migrate, "idempotent"
    migration = Class.new(Onceonly::ActiveRecord::Migration) { def self.name = "CreateOnceonlyTables" }
    migration.verbose = false
    assert_raises(::ActiveRecord::IrreversibleMigration) { migration.migrate(:down) }
    migration.migrate(:up)
    assert @store.op_enqueue(job_type: "x", op_key: "y", fingerprint: "f", payload: nil)
  end

  def test_the_cli_sees_the_tables_the_migration_made
    KeyedMail.perform_later("cli")
    url = Onceonly::ActiveRecord.url_for
    out = IO.popen([Support.onceonly_bin, "--db", url, "migrate"], err: %i[child out], &:read)
    assert $?.success?, "the CLI's migrate after the ActiveRecord migration: #{out}"
    assert_equal 0, @store.migrate, "and nothing was left for it to apply"
    out = IO.popen([Support.onceonly_bin, "--db", url, "inspect", "--json"], err: %i[child out], &:read)
    assert $?.success?, out
    rows = out.lines.map { |l| JSON.parse(l) }
    assert_equal [%w[ActiveJobCases.KeyedMail cli queued]], rows.map { |r| r.values_at("job", "key", "state") }
  end

  def test_a_job_is_guarded_once
    err = assert_raises(Onceonly::InvalidInput) do
      Class.new(KeyedMail) do
        def self.name = "ActiveJobCases.KeyedMailAgain"
        guarded key: 0, effect: :keyed
      end
    end
    assert_match(/inherits the guard of ActiveJobCases::KeyedMail/, err.message)
    assert_raises(Onceonly::InvalidInput) { KeyedMail.guarded(key: 0, effect: :keyed) }
  end

  def test_timing_rules_are_checked_when_the_class_loads_and_against_sidekiqs_shutdown_timeout
    err = assert_raises(Onceonly::TimingError) do
      Class.new(TestJob) do
        def self.name = "ActiveJobCases.BadTiming"
        guarded key: 0, effect: :keyed, lease: "5s", timeout: "10s"
      end
    end
    assert_match(/timeout/, err.message)
    err = assert_raises(Onceonly::TimingError) { Onceonly::ActiveJob.check_timing!(shutdown_timeout: 5) }
    assert_match(/job ActiveJobCases.LocalReceipt: Sidekiq's shutdown timeout \(5s\) must be longer than the job timeout \(10s\)/, err.message)
    refute_match(/KeyedMail/, err.message, "its timeout (2s) is within 5s")
    assert Onceonly::ActiveJob.check_timing!(shutdown_timeout: 25)
  end
end

class ActiveJobSqliteTest < Minitest::Test
  include FreshStores
  include ActiveJobCases

  def connect
    dir = Dir.mktmpdir("onceonly-aj")
    @cleanups << -> { FileUtils.rm_rf(dir) }
    ::ActiveRecord::Base.establish_connection(adapter: "sqlite3", database: File.join(dir, "app.db"), timeout: 30_000)
  end
end

class ActiveJobMysqlTest < Minitest::Test
  include FreshStores
  include ActiveJobCases

  def connect
    url = mysql_database_url(prefix: "rails")
    ::ActiveRecord::Base.establish_connection(url: url.sub(/\Amysql:/, "mysql2:"), variables: { time_zone: "+00:00" })
  end
end

class ActiveJobPostgresTest < Minitest::Test
  include FreshStores
  include ActiveJobCases

  def connect
    Support.need_postgres!(self)
    name = "rails_#{SecureRandom.hex(5)}"
    Support.pg_admin(%(CREATE DATABASE "#{name}"))
    @cleanups << -> { Support.pg_admin(%(DROP DATABASE IF EXISTS "#{name}" WITH (FORCE))) }
    ::ActiveRecord::Base.establish_connection(Support::PG_URL.sub(%r{/[^/]*\z}, "/#{name}"))
  end

  def test_the_store_url_from_activerecords_configuration
    config = ::ActiveRecord::DatabaseConfigurations::HashConfig.new(
      "test", "primary", { adapter: "postgresql", host: "db.internal", port: 5433, username: "app",
                           password: "p@ss word", database: "shop", sslmode: "require" }
    )
    assert_equal "postgres://app:p%40ss%20word@db.internal:5433/shop?sslmode=require", Onceonly::ActiveRecord.url_for(config)
    sqlite = ::ActiveRecord::DatabaseConfigurations::HashConfig.new("test", "primary", { adapter: "sqlite3", database: "db/x.sqlite3" })
    assert_equal "sqlite://#{File.expand_path('db/x.sqlite3')}", Onceonly::ActiveRecord.url_for(sqlite)
    mysql = ::ActiveRecord::DatabaseConfigurations::HashConfig.new(
      "test", "primary", { adapter: "mysql2", host: "db", port: 3307, username: "app", password: "s/cret", database: "shop" }
    )
    assert_equal "mysql://app:s%2Fcret@db:3307/shop", Onceonly::ActiveRecord.url_for(mysql)
    oracle = ::ActiveRecord::DatabaseConfigurations::HashConfig.new("test", "primary", { adapter: "oracle", database: "x" })
    assert_raises(Onceonly::InvalidInput) { Onceonly::ActiveRecord.url_for(oracle) }
  end
end

# Registered only while these tests run (setup).
Onceonly::ActiveJob.registry.clear if defined?(::ActiveJob)
