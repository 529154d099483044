#!/usr/bin/env ruby
# frozen_string_literal: true

# Guarded Sidekiq jobs next to the same job unguarded, in the same run, on
# the same Sidekiq processes: jobs/s from the first push to the last
# completion, and each job's latency from push to done (p50, p99).
# Rounds alternate plain and guarded so drift on a shared machine hits both.
#
#   ruby ruby/bench/sidekiq_bench.rb --redis redis://127.0.0.1:6379/12 --db sqlite:///tmp/b.db \
#        [--jobs 2000] [--rounds 3] [--processes 2] [--concurrency 5]

$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "optparse"
require "securerandom"
require "rbconfig"
require "tmpdir"

opts = { jobs: 2000, rounds: 3, processes: 2, concurrency: 5, push_threads: 5, calls: 0,
         kinds: %w[plain guarded claim-only raw raw-push] }
OptionParser.new do |o|
  o.on("--redis URL") { |v| opts[:redis] = v }
  o.on("--db URL") { |v| opts[:db] = v }
  o.on("--jobs N", Integer, "Jobs per round and kind") { |v| opts[:jobs] = v }
  o.on("--rounds N", Integer) { |v| opts[:rounds] = v }
  o.on("--processes N", Integer) { |v| opts[:processes] = v }
  o.on("--concurrency N", Integer) { |v| opts[:concurrency] = v }
  o.on("--push-threads N", Integer, "Threads pushing, like an app's request threads (default 5)") { |v| opts[:push_threads] = v }
  o.on("--calls N", Integer, "First, guard.run N times in one thread next to its statements raw (PostgreSQL)") { |v| opts[:calls] = v }
  o.on("--kinds LIST", Array, "Jobs to run (default plain,guarded,claim-only,raw,raw-push)") { |v| opts[:kinds] = v }
end.parse!
abort "--redis and --db are required" unless opts[:redis] && opts[:db]
unless opts[:db].start_with?("postgres")
  # The raw baselines run the PostgreSQL statements through `pg`.
  opts[:kinds] -= %w[raw raw-push]
  abort "--calls needs a PostgreSQL --db" if opts[:calls].positive?
end
$stdout.sync = true

run = SecureRandom.hex(4)
env = { "REDIS_URL" => opts[:redis], "ONCEONLY_DB" => opts[:db], "ONCEONLY_BENCH_RUN" => run }
env.each { |k, v| ENV[k] = v }
require "onceonly/sidekiq"
require "sidekiq/api"
Sidekiq.configure_client { |c| c.redis = { url: opts[:redis] } }
Sidekiq.logger.level = Logger::WARN
Redis.sadd_returns_boolean = false
store = Onceonly.connect(opts[:db])
store.migrate
Onceonly::Sidekiq.store = store
require_relative "jobs"
require_relative "per_call"

Bench.per_call(store, opts[:db], opts[:calls]) if opts[:calls].positive?

logs = Dir.mktmpdir("onceonly-bench-")
sidekiq = File.exist?("/usr/bin/sidekiq") ? "/usr/bin/sidekiq" : "sidekiq"
pids = Array.new(opts[:processes]) do |i|
  Process.spawn(env, RbConfig.ruby, sidekiq, "-r", File.expand_path("jobs.rb", __dir__), "-q", "bench",
                "-c", opts[:concurrency].to_s, out: "#{logs}/#{i}.log", err: "#{logs}/#{i}.log")
end
sleep 0.2 until Sidekiq::ProcessSet.new.count { |p| pids.include?(p["pid"]) } == pids.size

def percentile(sorted, q)
  sorted[[(sorted.size * q).ceil - 1, 0].max]
end

# Pushes `n` jobs of `klass` (one new operation each) from `threads` threads
# and waits for them all.
def round(klass, kind, n, run, round_no, threads, db)
  keys = Queue.new
  n.times { |i| keys << "r#{round_no}-#{kind}-#{i}" }
  keys.close
  started = Time.now.to_f
  sent_at_push = Bench.sent
  Array.new(threads) do
    Thread.new do
      while (key = keys.pop)
        args = [key, Time.now.to_f]
        Bench::Raw.enqueue(db, "bench-#{run}-raw-push", key, Onceonly::Payload.from_value({ "args" => args })) if kind == "raw-push"
        Sidekiq::Client.push("class" => klass, "args" => args)
      end
    end
  end.each(&:join)
  pushed = Time.now.to_f
  sent_at_push = Bench.sent - sent_at_push
  sleep 0.01 until Sidekiq.redis { |r| r.get("bench:#{run}:#{kind}:done").to_i } >= n
  last = Sidekiq.redis { |r| r.get("bench:#{run}:#{kind}:last").to_f }
  lat = Sidekiq.redis { |r| r.lrange("bench:#{run}:#{kind}:latency", 0, -1) }.map(&:to_f).sort
  sent = Sidekiq.redis { |r| r.get("bench:#{run}:#{kind}:sent") }.to_i
  Sidekiq.redis { |r| r.del("bench:#{run}:#{kind}:done", "bench:#{run}:#{kind}:latency", "bench:#{run}:#{kind}:sent") }
  { kind: kind, jobs: n, rate: n / (last - started), push_rate: n / (pushed - started),
    p50: percentile(lat, 0.5), p99: percentile(lat, 0.99), sent: (sent + sent_at_push).to_f / n }
end

puts "Sidekiq #{Sidekiq::VERSION}, #{opts[:processes]} processes x concurrency #{opts[:concurrency]}, " \
     "#{opts[:push_threads]} pushing threads, #{Onceonly.redact(opts[:db])}, #{opts[:jobs]} jobs per round and kind, " \
     "#{opts[:rounds]} rounds; jobs/s from the first push to the last job done, latency from push to done"
puts format("%-6s %-11s %7s %10s %12s %10s %10s %7s", "round", "job", "jobs", "jobs/s", "pushes/s", "p50 ms", "p99 ms",
            "stmts")
kinds = { "plain" => Bench::PlainJob, "guarded" => Bench::GuardedJob, "claim-only" => Bench::GuardedClaimOnlyJob,
          "raw" => Bench::RawJob, "raw-push" => Bench::RawPushJob }.slice(*opts[:kinds])
results = []
begin
  opts[:rounds].times do |r|
    kinds.each do |kind, klass|
      res = round(klass, kind, opts[:jobs], run, r, opts[:push_threads], opts[:db])
      results << res
      puts format("%-6d %-11s %7d %10.0f %12.0f %10.1f %10.1f %7.2f", r + 1, kind, res[:jobs], res[:rate], res[:push_rate],
                  res[:p50], res[:p99], res[:sent])
    end
  end
  median = {}
  kinds.each_key do |kind|
    mine = results.select { |x| x[:kind] == kind }
    rates = mine.map { |x| x[:rate] }.sort
    median[kind] = rates[rates.size / 2]
    puts format("%-11s median %6.0f jobs/s (min %.0f, max %.0f); median p50 %.1f ms, p99 %.1f ms; %.2f statements/job", kind,
                median[kind], rates.first, rates.last,
                mine.map { |x| x[:p50] }.sort[mine.size / 2], mine.map { |x| x[:p99] }.sort[mine.size / 2],
                mine.map { |x| x[:sent] }.sort[mine.size / 2])
  end
  # Time per job and worker thread over the plain job: what the guard adds,
  # next to what its own statements cost run raw at the same concurrency.
  threads = opts[:processes] * opts[:concurrency]
  added = ->(kind) { threads * (1.0 / median[kind] - 1.0 / median["plain"]) * 1000 }
  [%w[guarded raw-push], %w[claim-only raw]].each do |guarded, raw|
    next unless median[guarded] && median[raw] && median["plain"]

    puts format("added per job and thread: %s %.2f ms, its statements raw (%s) %.2f ms; %s/raw %.2f (target <= 1.5)",
                guarded, added.(guarded), raw, added.(raw), guarded, added.(guarded) / added.(raw))
  end
  effects = Sidekiq.redis { |r| r.hvals("bench:#{run}:effects") }.map(&:to_i)
  puts "effects: #{effects.size} keys, each done #{effects.uniq.sort.join('/')} time(s)"
ensure
  pids.each { |pid| Process.kill(:TERM, pid) rescue nil } # rubocop:disable Style/RescueModifier
  pids.each { |pid| Process.wait(pid) rescue nil } # rubocop:disable Style/RescueModifier
  Sidekiq.redis { |r| r.del(*r.keys("bench:#{run}:*")) unless r.keys("bench:#{run}:*").empty? }
  FileUtils.rm_rf(logs)
end
