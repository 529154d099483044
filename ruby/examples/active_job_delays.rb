# frozen_string_literal: true

# Measures, through a real Sidekiq process running an ActiveJob job, the
# delay docs/rails.md states for a released operation: the guard calls
# retry_job(wait: N) with N the seconds until the operation is due again
# (the release's backoff, 500ms doubling per claim, at least 1s); Sidekiq
# keeps the job in its scheduled set until a poller moves it to its queue.
# The job's effect is not sent (Onceonly::Effect::NotSent) on its first
# --retries performs, then done.
#
#   ruby -Iruby/lib ruby/examples/active_job_delays.rb --redis redis://127.0.0.1:6379/7 [--retries 5] [--trials 3]
#
# SQLite file in a temporary directory; a queue of its own in the Redis database given.
require "optparse"
require "tmpdir"
require "rbconfig"
require "json"
require "securerandom"

opts = { redis: "redis://127.0.0.1:6379/7", retries: 5, trials: 3 }
OptionParser.new do |o|
  o.on("--redis URL") { |v| opts[:redis] = v }
  o.on("--retries N", Integer) { |v| opts[:retries] = v }
  o.on("--trials N", Integer) { |v| opts[:trials] = v }
end.parse!

dir = Dir.mktmpdir("onceonly-aj-delays")
queue = "aj_delays_#{SecureRandom.hex(3)}"
app = File.join(dir, "app.rb")
File.write(app, <<~RUBY)
  $LOAD_PATH.unshift #{File.expand_path('../lib', __dir__).inspect}
  require "onceonly/sidekiq"
  require "onceonly/active_job"
  Sidekiq.configure_server { |c| c.redis = { url: #{opts[:redis].inspect} } }
  Sidekiq.configure_client { |c| c.redis = { url: #{opts[:redis].inspect} } }
  ActiveJob::Base.queue_adapter = :sidekiq
  ActiveJob::Base.logger = Logger.new(File::NULL)
  ActiveRecord::Base.establish_connection(adapter: "sqlite3", database: #{File.join(dir, 'app.db').inspect})
  Onceonly::ActiveJob.on_outcome = lambda do |_klass, key, outcome|
    Sidekiq.redis { |r| r.rpush("\#{#{queue.inspect}}:\#{key}", JSON.generate("t" => Time.now.to_f, "outcome" => outcome.class.name.split("::").last)) }
  end

  class Probe < ActiveJob::Base
    include Onceonly::ActiveJob
    queue_as #{queue.inspect}
    guarded key: 0, effect: :keyed, max_retries: 0, lease: "5s", timeout: "1s"

    def perform(key)
      tries = Sidekiq.redis { |r| r.incr("\#{#{queue.inspect}}:tries:\#{key}") }
      raise Onceonly::Effect::NotSent, "refused" if tries <= #{opts[:retries]}

      "ok"
    end
  end
RUBY

require app
require "sidekiq/api"
Onceonly::ActiveRecord.migrate
sidekiq = File.exist?("/usr/bin/sidekiq") ? "/usr/bin/sidekiq" : "sidekiq"
log = File.join(dir, "sidekiq.log")
pid = Process.spawn(RbConfig.ruby, sidekiq, "-r", app, "-q", queue, "-c", "2", "-t", "5", out: log, err: log)
sleep 0.2 until Sidekiq::ProcessSet.new.any? { |p| p["pid"] == pid }
puts "retry_job delay: 1 Sidekiq #{Sidekiq::VERSION} process (concurrency 2), ActiveJob #{ActiveJob.version}, " \
     "a keyed job not sent #{opts[:retries]} times (max_retries 0: each perform releases the operation)"
puts format("%-6s %-8s %-11s %10s", "trial", "perform", "outcome", "after s")
totals = []
begin
  opts[:trials].times do |trial|
    key = "t#{trial}-#{SecureRandom.hex(2)}"
    Probe.perform_later(key)
    list = "#{queue}:#{key}"
    store = Onceonly::ActiveJob.store
    deadline = Time.now + 300
    sleep 0.2 until store.op_get("Probe", key)&.record&.state == "completed" || Time.now > deadline
    marks = Sidekiq.redis { |r| r.lrange(list, 0, -1) }.map { |j| JSON.parse(j) }
    abort "trial #{trial}: not completed within 300s (log: #{log})" if marks.empty?

    # Released: retry_job(wait: the backoff left, at least 1s); NotDue: came back
    # before the backoff was over, retry_job(wait: the rest).
    marks.each_with_index do |m, i|
      after = i.zero? ? "-" : format("%.1f", m["t"] - marks[i - 1]["t"])
      name = m["outcome"] == "RetryLater" ? "released" : m["outcome"]
      puts format("%-6d %-8d %-11s %10s", trial, i + 1, name, after)
    end
    backoffs = store.op_history("Probe", key).select { |e| e.event == "retry" }.map { |e| e.retry_after_ms / 1000.0 }
    puts "       backoffs asked: #{backoffs.join(', ')} s (sum #{backoffs.sum}); first perform to done " \
         "#{format('%.1f', marks.last['t'] - marks.first['t'])} s"
    totals << (marks.last["t"] - marks.first["t"])
    Sidekiq.redis { |r| r.del(list, "#{queue}:tries:#{key}") }
  end
ensure
  Process.kill("TERM", pid)
  Process.wait(pid)
  Sidekiq.redis { |r| r.del("queue:#{queue}") }
end
puts "first perform to done: #{totals.map { |t| format('%.1f', t) }.join(', ')} s"
