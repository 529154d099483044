# frozen_string_literal: true

# Measures, through real Sidekiq processes, the two delays docs/sidekiq.md
# states:
#
#   retry:   a delivery that meets a live claim raises RetryLater(retry_in);
#            how long until Sidekiq really delivers it again (Sidekiq adds
#            rand(10) * (retry_count + 1) s of jitter, then the scheduled
#            poller moves it from the retry set to the queue);
#   redrive: a process SIGKILLed while it holds a claim; how long after the
#            lease ran out the re-drive (Redrive.every(R) in every process)
#            has pushed it again and the job completed.
#
#   ruby -Iruby/lib ruby/examples/sidekiq_delays.rb --redis redis://127.0.0.1:6379/7 \
#        [--retries 5] [--trials 4] [--lease 5] [--every 10]
#
# It empties the Redis database given. SQLite file in a temporary directory.
require "optparse"
require "tmpdir"
require "rbconfig"
require "json"
require "onceonly/sidekiq"

opts = { redis: "redis://127.0.0.1:6379/7", retries: 5, trials: 4, lease: 5, every: 10 }
OptionParser.new do |o|
  o.on("--redis URL") { |v| opts[:redis] = v }
  o.on("--retries N", Integer) { |v| opts[:retries] = v }
  o.on("--trials N", Integer) { |v| opts[:trials] = v }
  o.on("--lease S", Integer) { |v| opts[:lease] = v }
  o.on("--every S", Integer) { |v| opts[:every] = v }
end.parse!

dir = Dir.mktmpdir("onceonly-delays")
db = "sqlite://#{dir}/ops.db"
jobs = File.join(dir, "jobs.rb")
File.write(jobs, <<~RUBY)
  $LOAD_PATH.unshift #{File.expand_path('../lib', __dir__).inspect}
  require "onceonly/sidekiq"
  Sidekiq.configure_server { |c| c.redis = { url: #{opts[:redis].inspect} } }
  Sidekiq.configure_client { |c| c.redis = { url: #{opts[:redis].inspect} } }
  Onceonly::Sidekiq.store = Onceonly.connect(#{db.inspect})
  Sidekiq.configure_server { |_| Onceonly::Sidekiq::Redrive.every(#{opts[:every]}) }
  Onceonly::Sidekiq.on_outcome = lambda do |klass, key, outcome|
    next unless klass.name == "Probe"

    # The delay the guard asks of Sidekiq (guarded_job.rb, settle): the lease left + 1s.
    retry_in = outcome.is_a?(Onceonly::Outcome::InProgress) ? ((outcome.lease_ms - outcome.age_ms) / 1000.0).ceil + 1 : nil
    Sidekiq.redis { |r| r.rpush("probe:attempts", JSON.generate("t" => Time.now.to_f, "retry_in" => retry_in)) }
  end

  class Probe
    include Sidekiq::Job
    include Onceonly::Sidekiq.guard(key: 0, effect: :keyed, lease: 3, timeout: 1)
    def perform(_key) = "ok"
  end

  class Hang
    include Sidekiq::Job
    include Onceonly::Sidekiq.guard(key: 0, effect: :keyed, lease: #{opts[:lease]}, timeout: #{opts[:lease] - 1})
    def perform(key)
      if Sidekiq.redis { |r| r.set("hang:\#{key}", Process.pid, nx: true) }
        sleep 1000 # killed here, holding the claim
      end
      "ok"
    end
  end
RUBY
require jobs
Sidekiq.redis(&:flushdb)
store = Onceonly::Sidekiq.store
store.migrate
sidekiq = File.exist?("/usr/bin/sidekiq") ? "/usr/bin/sidekiq" : "sidekiq"
spawn_one = -> { Process.spawn(RbConfig.ruby, sidekiq, "-r", jobs, "-c", "2", "-t", "25", out: File.join(dir, "sidekiq.log"), err: %i[child out]) }
procs = [spawn_one.call]

# 1. The retry delay: a live claim kept alive by a heartbeat from here.
payload = Onceonly::Sidekiq::Config.new.payload_for(["p"])
_, claim = store.op_claim(job_type: "Probe", op_key: "p", fingerprint: payload.fingerprint, payload: payload.json,
                          owner: "elsewhere", lease_ms: 3000)
beat = Thread.new { loop { store.op_heartbeat(job_type: "Probe", op_key: "p", token: claim.token, lease_ms: 3000); sleep 1 } }
Probe.perform_async("p")
attempts = []
due = {} # retry_count => when Sidekiq scheduled the retry (the retry set's score)
loop do
  attempts = Sidekiq.redis { |r| r.lrange("probe:attempts", 0, -1) }.map { |j| JSON.parse(j) }
  Sidekiq.redis { |r| r.zrange("retry", 0, -1, with_scores: true) }.each do |job, score|
    due[JSON.parse(job).fetch("retry_count")] ||= score
  end
  break if attempts.size > opts[:retries]

  sleep 0.05
end
beat.kill
puts "retry delay: 1 Sidekiq process (concurrency 2), Sidekiq #{Sidekiq::VERSION}, average_scheduled_poll_interval " \
     "#{Sidekiq.options[:average_scheduled_poll_interval]}s; a delivery meeting a live claim (lease 3s, renewed each second)"
puts format("%-12s %9s %10s %10s %11s %10s", "retry_count", "retry_in", "jitter s", "(bound)", "poller s", "total s")
attempts.each_cons(2).with_index do |(a, b), count|
  planned = due.fetch(count) - a["t"]
  puts format("%-12d %9d %10.1f %10d %11.1f %10.1f", count, a["retry_in"], planned - a["retry_in"], 9 * (count + 1),
              b["t"] - due.fetch(count), b["t"] - a["t"])
end

# 2. The re-drive: SIGKILL the process holding the claim; a second process re-drives.
procs << spawn_one.call
puts "\nre-drive: 2 Sidekiq processes, Redrive.every(#{opts[:every]}), lease #{opts[:lease]}s; the process holding the claim SIGKILLed"
puts format("%-6s %26s", "trial", "lease over -> completed, s")
opts[:trials].times do |i|
  key = "h#{i}"
  Hang.perform_async(key)
  pid = nil
  sleep 0.05 until (pid = Sidekiq.redis { |r| r.get("hang:#{key}") })
  record = nil
  sleep 0.05 until (record = store.op_get("Hang", key)&.record)&.state == "claimed"
  Process.kill(:KILL, Integer(pid))
  Process.wait(Integer(pid))
  procs.delete(Integer(pid))
  procs << spawn_one.call
  done = nil
  sleep 0.1 until (done = store.op_get("Hang", key).record).state == "completed"
  puts format("%-6d %26.1f", i, (done.completed_at - record.lease_until) / 1000.0)
end
procs.each { |p| Process.kill(:TERM, p) }
procs.each { |p| Process.wait(p) }
FileUtils.rm_rf(dir)
