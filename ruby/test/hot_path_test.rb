# frozen_string_literal: true

require_relative "test_helper"
require "onceonly/sidekiq"

# What a guarded job costs beyond its statements (issue #28): no thread
# started per job for its timeout, the store's statements prepared once per
# connection, and a store pool sized to Sidekiq's job threads.
class HotPathTest < Minitest::Test
  include FreshStores

  def test_the_job_timeout_is_watched_by_one_thread_for_all_jobs
    store = pg_store
    guard = Onceonly::Guard.new(store, Onceonly::JobSpec.new(job_type: "hot.timeout", effect: :keyed))
    before = Thread.list
    seen = []
    20.times { |i| guard.run("k#{i}", 1) { seen.concat(Thread.list - before - [Thread.current]) } }
    assert_operator seen.uniq.size, :<=, 1, "threads started for 20 jobs' timeouts: #{seen.uniq.size}"
  end

  def test_the_deadline_stops_a_block_that_swallows_standard_errors
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    assert_raises(Timeout::Error) do
      Onceonly::Deadline.within(0.05) do
        loop do
          sleep 0.01
        rescue StandardError
          nil
        end
      end
    end
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, :<, 5
  end

  def test_a_block_ending_at_its_deadline_never_leaks_the_deadline_out
    outcomes = Array.new(300) do
      Onceonly::Deadline.within(0.0005) { 200.times { Math.sqrt(2) } ; :done }
    rescue Timeout::Error
      :timed_out
    end
    sleep 0.05 # a deadline raised late would land here, outside within
    assert_empty outcomes - %i[done timed_out]
  end

  def test_deadlines_of_many_threads_each_stop_their_own_block
    results = Array.new(6) do |i|
      Thread.new do
        Onceonly::Deadline.within(i.even? ? 0.05 : 5) { sleep(i.even? ? 2 : 0.1) ; :done }
      rescue Timeout::Error
        :timed_out
      end
    end.map(&:value)
    assert_equal %i[timed_out done] * 3, results
  end

  def test_the_store_prepares_each_statement_once_per_connection
    store = pg_store
    guard = Onceonly::Guard.new(store, Onceonly::JobSpec.new(job_type: "hot.prepared", effect: :keyed))
    10.times { |i| guard.run("k#{i}", 1) { "sent" } }
    names = store.with_connection { |c| c.exec("SELECT statement FROM pg_prepared_statements").values.flatten }
    assert_equal 1, names.count { |s| s.include?("claim") && s.include?(store.schema) }, names.inspect
    assert_equal 2, names.size, "claim and move, each prepared once: #{names.inspect}"
  end

  def test_a_users_connection_is_left_without_prepared_statements
    store = pg_store
    guard = Onceonly::Guard.new(store, Onceonly::JobSpec.new(job_type: "hot.local", effect: :local))
    conn = PG.connect(Support::PG_URL)
    3.times { |i| guard.run_local("k#{i}", 1, conn: conn) { |_c, _ctx| "done" } }
    assert_equal 0, conn.exec("SELECT count(*) FROM pg_prepared_statements").getvalue(0, 0).to_i
  ensure
    conn&.close
  end

  def test_the_sidekiq_store_has_a_connection_per_job_thread
    old_store = Onceonly::Sidekiq.instance_variable_get(:@store)
    old_concurrency = ::Sidekiq.options[:concurrency]
    old_db = ENV["ONCEONLY_DB"]
    dir = Dir.mktmpdir("onceonly-rb")
    ENV["ONCEONLY_DB"] = "sqlite://#{dir}/ops.db"
    ::Sidekiq.options[:concurrency] = 12
    Onceonly::Sidekiq.store = nil
    assert_equal 12, Onceonly::Sidekiq.store.pool_size
  ensure
    Onceonly::Sidekiq.store = old_store
    ::Sidekiq.options[:concurrency] = old_concurrency
    ENV["ONCEONLY_DB"] = old_db
    FileUtils.rm_rf(dir) if dir
  end
end
