# frozen_string_literal: true

require_relative "test_helper"
require "rbconfig"

# A real `sidekiq` process running a guarded job (Debian's Sidekiq 6.4 with
# redis-rb 4.8): its log has no deprecation line from Sidekiq's own calls
# (BRPOP on every fetch, SADD on every push and heartbeat), while a
# deprecated call the application makes itself is still printed.
class SidekiqLogTest < Minitest::Test
  include FreshStores

  REDIS = ENV.fetch("ONCEONLY_TEST_REDIS", "redis://127.0.0.1:6379/13")
  JOBS = <<~RUBY
    $LOAD_PATH.unshift #{File.expand_path('../lib', __dir__).inspect}
    require "onceonly/sidekiq"
    Sidekiq.configure_server { |c| c.redis = { url: ENV.fetch("TEST_REDIS") } }
    Sidekiq.configure_client { |c| c.redis = { url: ENV.fetch("TEST_REDIS") } }
    Onceonly::Sidekiq.store = Onceonly.connect(ENV.fetch("ONCEONLY_DB"))

    class LoggedMail
      include Sidekiq::Job
      include Onceonly::Sidekiq.guard(key: 0, effect: :keyed, lease: 10, timeout: 5)

      def perform(order_id)
        # The application's own deprecated call (SADD's boolean): still printed.
        Sidekiq.redis { |c| c.sadd("app-set", order_id) } if order_id == "o-0"
        "sent \#{order_id}"
      end
    end
  RUBY

  def setup
    super
    require "redis"
    Support.need_server!(self, "Redis at #{REDIS}") { Redis.new(url: REDIS).flushdb }
    @dir = Dir.mktmpdir("onceonly-sidekiq-log")
    @cleanups << -> { FileUtils.rm_rf(@dir) }
    @store = sqlite_store
    File.write(File.join(@dir, "jobs.rb"), JOBS)
  end

  def env
    { "TEST_REDIS" => REDIS, "ONCEONLY_DB" => @store.url }
  end

  def run_ruby(code)
    out = IO.popen(env, [RbConfig.ruby, "-r", File.join(@dir, "jobs.rb"), "-e", code], err: %i[child out], &:read)
    assert $?.success?, out
    out
  end

  def test_a_sidekiq_process_running_a_guarded_job_logs_no_deprecation_line
    pushed = run_ruby(%q(3.times { |i| LoggedMail.perform_async("o-#{i}") }))
    refute_match(/deprecat|will always return|Redis#sadd/i, pushed, "pushing prints no deprecation line")

    log = File.join(@dir, "sidekiq.log")
    sidekiq = ENV.fetch("SIDEKIQ_BIN") { File.exist?("/usr/bin/sidekiq") ? "/usr/bin/sidekiq" : "sidekiq" }
    pid = Process.spawn(env, RbConfig.ruby, sidekiq, "-r", File.join(@dir, "jobs.rb"), "-c", "2", "-t", "20",
                        out: log, err: %i[child out])
    begin
      deadline = Time.now + 60
      sleep 0.2 until Time.now > deadline || @store.op_list(job_type: "LoggedMail", state: "completed").size == 3
      # Idle fetches: BRPOP times out after 2s and fetches again.
      sleep 5
    ensure
      Process.kill("TERM", pid)
      Process.wait(pid)
    end

    text = File.read(log)
    assert_equal 3, @store.op_list(job_type: "LoggedMail", state: "completed").size, text
    assert_match(/Bye!/, text, "the process ran and stopped cleanly")
    sidekiq_lines = text.lines.grep(/deprecat|will always return|Redis 5\.0/i).grep_v(/jobs\.rb/)
    assert_empty sidekiq_lines, "deprecation lines from Sidekiq's own calls"
    assert_equal 1, text.lines.grep(/Redis#sadd.*jobs\.rb/).size, "the application's own deprecated call is still printed:\n#{text}"
  end
end
