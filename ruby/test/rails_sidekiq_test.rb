# frozen_string_literal: true

require_relative "test_helper"
require "rbconfig"
require "timeout"

ENV["RAILS_TEST_LOG"] ||= "warn" # this process's ActiveJob log; the Sidekiq processes log at info to files
begin
  require "active_record"
  require "active_job"
rescue LoadError
  nil
end
require_relative "support/rails_app" if defined?(::ActiveJob)
require "sidekiq/api" if defined?(::ActiveJob)

# Guarded ActiveJob jobs run by real `sidekiq -r test/support/rails_app.rb`
# processes (the Sidekiq adapter, Debian's Rails 6.1 and Sidekiq 6.4), on
# PostgreSQL and MySQL/MariaDB (a database of this test's own) and on SQLite: duplicates give
# one effect; a local job's ActiveRecord write commits with its record; a
# process SIGKILLed between the write and the commit leaves neither, and the
# re-drive brings the job back to be done once.
class RailsSidekiqTest < Minitest::Test
  include FreshStores

  REDIS = ENV.fetch("ONCEONLY_TEST_REDIS", "redis://127.0.0.1:6379/13")
  JOBS = defined?(::ActiveJob) ? [RailsApp::Ship, RailsApp::Notify].to_h { |k| [k.onceonly_config.spec.job_type, k] }.freeze : {}

  def setup
    super
    Support.unavailable!(self, "Rails (apt-get install ruby-rails ruby-activejob)") unless defined?(::ActiveJob)
    Support.need_server!(self, "Redis at #{REDIS}") { Sidekiq.redis(&:ping) }
    @dir = Dir.mktmpdir("onceonly-rails")
    @cleanups << -> { FileUtils.rm_rf(@dir) }
    ENV["RAILS_TEST_DIR"] = @dir
    @queue = "rails_#{SecureRandom.hex(4)}"
    @cleanups << -> { Sidekiq.redis { |r| r.del("queue:#{@queue}") } }
    @pids = []
    @cleanups << -> { @pids.each { |pid| stop(pid) } }
    Onceonly::ActiveJob.registry.replace(JOBS)
    @cleanups << -> { Onceonly::ActiveJob.registry.clear } # other suites' re-drive must not meet them
    @base = rand(1_000_000) * 10 # order ids of this test (the re-drive's marks are per job type and key)
  end

  def teardown
    ::ActiveRecord::Base.remove_connection if defined?(::ActiveRecord) && ::ActiveRecord::Base.connected?
    super
  end

  def postgres_app
    Support.need_postgres!(self)
    name = "rails_#{SecureRandom.hex(5)}"
    Support.pg_admin(%(CREATE DATABASE "#{name}"))
    @cleanups << -> { Support.pg_admin(%(DROP DATABASE IF EXISTS "#{name}" WITH (FORCE))) }
    app(Support::PG_URL.sub(%r{/[^/]*\z}, "/#{name}"))
  end

  def mysql_app
    url = mysql_database_url(prefix: "rails") # mysql://root@127.0.0.1:3306/rails_...
    app(url.sub(/\Amysql:/, "mysql2:"))
  end

  def sqlite_app
    app("sqlite3:#{File.join(@dir, 'app.db')}")
  end

  def app(db_url)
    @db_url = db_url
    RailsApp.connect!(db_url, queue: @queue)
    RailsApp.create_tables!
    @store = Onceonly::ActiveJob.store
  end

  # A Sidekiq process running the app (ready once it is in Sidekiq's process list).
  def start_sidekiq(redrive: nil)
    log = File.join(@dir, "sidekiq-#{@pids.size + 1}.log")
    env = { "RAILS_TEST_DB" => @db_url, "RAILS_TEST_DIR" => @dir, "RAILS_TEST_QUEUE" => @queue,
            "ONCEONLY_TEST_REDIS" => REDIS, "RAILS_TEST_LOG" => "info", "RUBYLIB" => File.expand_path("../lib", __dir__) }
    env["RAILS_TEST_REDRIVE"] = redrive.to_s if redrive
    sidekiq = ENV.fetch("SIDEKIQ_BIN") { File.exist?("/usr/bin/sidekiq") ? "/usr/bin/sidekiq" : "sidekiq" }
    pid = Process.spawn(env, RbConfig.ruby, sidekiq, "-r", File.expand_path("support/rails_app.rb", __dir__),
                        "-q", @queue, "-c", "3", "-t", "5", out: log, err: log)
    @pids << pid
    wait_for("Sidekiq process #{pid} up (log #{log})", 60) do
      raise "sidekiq #{pid} exited: #{File.read(log)}" if Process.waitpid(pid, Process::WNOHANG)

      Sidekiq::ProcessSet.new.any? { |p| p["pid"] == pid }
    end
    pid
  end

  # SIGKILL, then the dead process out of Sidekiq's process list (its busy
  # job would count for a minute, until its heartbeat key expires).
  def kill(pid)
    Process.kill("KILL", pid)
    Process.waitpid(pid)
    @pids.delete(pid)
    Sidekiq.redis do |r|
      r.smembers("processes").select { |id| id.split(":")[-2].to_i == pid }.each do |id|
        r.srem?("processes", id)
        r.unlink(id, "#{id}:workers")
      end
    end
  end

  def stop(pid)
    Process.kill("TERM", pid)
    Timeout.timeout(20) { Process.waitpid(pid) }
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  rescue Timeout::Error
    Process.kill("KILL", pid)
    Process.waitpid(pid)
  end

  def wait_for(what, seconds = 30)
    deadline = Time.now + seconds
    until (value = yield)
      flunk "timed out after #{seconds}s waiting for #{what}; logs: #{logs}" if Time.now > deadline
      sleep 0.1
    end
    value
  end

  def logs
    Dir[File.join(@dir, "sidekiq-*.log")].sort.map { |f| "\n--- #{f}\n#{File.read(f).lines.last(30).join}" }.join
  end

  def lines(file)
    path = File.join(@dir, file)
    File.exist?(path) ? File.readlines(path, chomp: true) : []
  end

  def outcomes(key)
    lines("outcomes.log").select { |l| l.split[1] == key }
  end

  def record(job_type, key)
    @store.op_get(job_type, key)&.record
  end

  def shipments(order_id)
    RailsApp::Shipment.where(order_id: order_id).count
  end

  def drained?
    Sidekiq::Queue.new(@queue).size.zero? &&
      Sidekiq::Workers.new.none? { |_process, _thread, work| work["queue"] == @queue }
  end

  # The same order's job delivered three times (on commit, then twice more
  # by hand) to a process of three threads: one Shipment row, committed
  # with the record, and the other deliveries find it completed; an order
  # whose transaction rolls back never enqueues its job and leaves no record.
  def duplicates_give_one_effect
    start_sidekiq
    order = RailsApp::Order.create!(email: "ada@example.com") # enqueued by after_create_commit
    2.times { RailsApp::Ship.perform_later(order.id) }
    rolled_back = nil
    RailsApp::Order.transaction do
      rolled_back = RailsApp::Order.create!(email: "bob@example.com")
      raise ::ActiveRecord::Rollback
    end
    3.times { RailsApp::Notify.perform_later(order.id) }
    wait_for("6 deliveries") { outcomes("order-#{order.id}").size == 3 && outcomes("notify-#{order.id}").size == 3 }
    wait_for("the queue drained") { drained? }

    assert_equal 1, shipments(order.id), "three deliveries, one Shipment row"
    ship = record("RailsApp.Ship", "order-#{order.id}")
    assert_equal ["completed", 1], [ship.state, ship.token]
    assert_equal({ "order" => order.id, "rows" => 1 }, ship.result_value)
    assert_equal %w[Done Done Done], outcomes("order-#{order.id}").map { |l| l.split[2] }
    effects = lines("effects.log").grep(/\ARailsApp.Notify:notify-#{order.id} /)
    assert_equal 1, effects.size, "three deliveries of a keyed job, one effect: #{effects}"
    assert_equal "completed", record("RailsApp.Notify", "notify-#{order.id}").state
    assert_nil RailsApp::Order.find_by(id: rolled_back.id)
    assert_nil record("RailsApp.Ship", "order-#{rolled_back.id}"), "a rolled-back order enqueued nothing"
    assert_empty outcomes("order-#{rolled_back.id}")
  end

  # The process is SIGKILLed after the job's Shipment row is written and
  # before ActiveRecord's commit: neither the row nor a completed record is
  # left (the record stays queued, as the enqueue wrote it; the claim rolled
  # back with the row). Sidekiq's fetch dropped the job with the process;
  # the re-drive of a second process pushes it again once it is overdue by
  # the lease, and the job is done once, under the first claim that lasted.
  def killed_between_the_write_and_the_commit
    order_id = @base + 7
    File.write(File.join(@dir, "pause-#{order_id}"), "")
    victim = start_sidekiq
    RailsApp::Ship.perform_later(order_id)
    wait_for("the Shipment row written") { File.exist?(File.join(@dir, "written-#{order_id}")) }
    assert_equal victim.to_s, File.read(File.join(@dir, "written-#{order_id}"))
    kill(victim)

    assert_equal 0, shipments(order_id), "the row written before the kill was never committed"
    r = record("RailsApp.Ship", "order-#{order_id}")
    assert_equal ["queued", 0, 0], [r.state, r.token, r.attempts], "no claim, no completion: the enqueue's record only"
    assert_empty outcomes("order-#{order_id}")

    start_sidekiq(redrive: 1)
    wait_for("the re-driven job done", 60) { record("RailsApp.Ship", "order-#{order_id}").state == "completed" }
    wait_for("the queue drained") { drained? }
    assert_equal 1, shipments(order_id), "done once after the redelivery"
    r = record("RailsApp.Ship", "order-#{order_id}")
    assert_equal [1, 1], [r.token, r.attempts], "the killed claim rolled back: the redelivery's is the first"
    refute_equal victim, RailsApp::Shipment.where(order_id: order_id).pick(:pid)
  end

  # A keyed job's process SIGKILLed after its claim committed and before
  # its effect: the claim goes past its lease, the re-drive pushes the job
  # through ActiveJob's Sidekiq adapter, the next delivery takes the stale
  # claim over (keyed: redo) and the effect happens once.
  def redrive_of_a_stale_keyed_claim
    order_id = @base + 9
    File.write(File.join(@dir, "pause-notify-#{order_id}"), "")
    victim = start_sidekiq
    RailsApp::Notify.perform_later(order_id)
    wait_for("the claim taken") { File.exist?(File.join(@dir, "written-notify-#{order_id}")) }
    kill(victim)
    r = record("RailsApp.Notify", "notify-#{order_id}")
    assert_equal ["claimed", 1], [r.state, r.token]

    start_sidekiq(redrive: 1)
    wait_for("the stale claim taken over and done", 60) { record("RailsApp.Notify", "notify-#{order_id}").state == "completed" }
    r = record("RailsApp.Notify", "notify-#{order_id}")
    assert_equal 2, r.token, "taken over once"
    assert_equal 1, lines("effects.log").grep(/\ARailsApp.Notify:notify-#{order_id} /).size
    assert(@store.op_history("RailsApp.Notify", "notify-#{order_id}").any? { |e| e.event == "take_over" })
  end

  # Sidekiq's shutdown timeout (-t 1) shorter than the jobs' timeout (2s):
  # the server refuses to start, before it consumes, naming the rule.
  def test_a_sidekiq_server_checks_the_guarded_jobs_timing_at_startup
    sqlite_app
    log = File.join(@dir, "refused.log")
    env = { "RAILS_TEST_DB" => @db_url, "RAILS_TEST_DIR" => @dir, "RAILS_TEST_QUEUE" => @queue,
            "ONCEONLY_TEST_REDIS" => REDIS, "RUBYLIB" => File.expand_path("../lib", __dir__) }
    sidekiq = ENV.fetch("SIDEKIQ_BIN") { File.exist?("/usr/bin/sidekiq") ? "/usr/bin/sidekiq" : "sidekiq" }
    pid = Process.spawn(env, RbConfig.ruby, sidekiq, "-r", File.expand_path("support/rails_app.rb", __dir__),
                        "-q", @queue, "-t", "1", out: log, err: log)
    @pids << pid
    status = Timeout.timeout(60) { Process.wait2(pid).last }
    @pids.delete(pid)
    refute status.success?
    assert_match(/timing rule broken: job RailsApp.Ship: Sidekiq's shutdown timeout \(1s\) must be longer than the job timeout \(2s\)/,
                 File.read(log))
  end

  def test_postgres_duplicates_give_one_effect
    postgres_app
    duplicates_give_one_effect
  end

  def test_postgres_a_process_killed_between_the_ar_write_and_the_commit_leaves_neither
    postgres_app
    killed_between_the_write_and_the_commit
  end

  def test_postgres_the_redrive_brings_back_a_stale_claim
    postgres_app
    redrive_of_a_stale_keyed_claim
  end

  def test_mysql_duplicates_give_one_effect
    mysql_app
    duplicates_give_one_effect
  end

  def test_mysql_a_process_killed_between_the_ar_write_and_the_commit_leaves_neither
    mysql_app
    killed_between_the_write_and_the_commit
  end

  def test_sqlite_duplicates_give_one_effect
    sqlite_app
    duplicates_give_one_effect
  end

  def test_sqlite_a_process_killed_between_the_ar_write_and_the_commit_leaves_neither
    sqlite_app
    killed_between_the_write_and_the_commit
  end
end

# Registered only while these tests run (setup).
Onceonly::ActiveJob.registry.clear if defined?(::ActiveJob)
