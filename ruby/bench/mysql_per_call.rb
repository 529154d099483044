# frozen_string_literal: true

# guard.run on MySQL/MariaDB (keyed, no-op effect: the clock read, the
# claim's insert, the fenced completion) next to the minimal two-statement
# operation run raw through mysql2 (claim_insert.sql with the client's clock,
# then move.sql to completed, each autocommitted and checked by its
# affected-row count), at 1 and 16 threads, alternating rounds:
#
#   ruby -Iruby/lib ruby/bench/mysql_per_call.rb mysql://root@127.0.0.1:3306/DB [calls] [threads,...]
require "onceonly"
require "onceonly/stores/mysql"
require "securerandom"

url = ARGV.fetch(0)
calls = Integer(ARGV[1] || 2000)
concurrencies = (ARGV[2] || "1,16").split(",").map { |n| Integer(n) }
rounds = 3
run = SecureRandom.hex(3)
store = Onceonly.connect(url, pool: concurrencies.max)
store.migrate
payload = Onceonly::Payload.from_value({ "args" => [1] })
result = JSON.generate({ "ok" => true })
guard = Onceonly::Guard.new(store, Onceonly::JobSpec.new(job_type: "bench-#{run}", effect: :keyed))
insert_sql = Onceonly::SQL.query("mysql", "claim_insert")
move_sql = Onceonly::SQL.query("mysql", "move")

raw = lambda do |key|
  c = Thread.current[:bench_raw] ||= begin
    conn = Mysql2::Client.new(**Onceonly::MysqlStore.client_options(url))
    [conn.prepare(insert_sql), conn.prepare(move_sql)]
  end
  now = Process.clock_gettime(Process::CLOCK_REALTIME, :millisecond)
  c[0].execute("bench-#{run}-raw", key, "bench", payload.fingerprint, payload.json, now, now + 30_000, now, now)
  raise "raw claim inserted #{c[0].affected_rows}" unless c[0].affected_rows == 1

  c[1].execute(0, "completed", nil, result, nil, 0, "bench-#{run}-raw", key, 1, "claimed", 0)
  raise "raw completion moved #{c[1].affected_rows}" unless c[1].affected_rows == 1
end
guarded = ->(key) { guard.run(key, payload) { { "ok" => true } } }

concurrencies.each do |threads|
  rates = Hash.new { |h, k| h[k] = [] }
  rounds.times do |r|
    { "raw" => raw, "guard.run" => guarded }.each do |name, one|
      t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      Array.new(threads) do |t|
        Thread.new { (calls / threads).times { |i| one.("c#{threads}-r#{r}-t#{t}-#{i}") } }
      end.each(&:join)
      rates[name] << (calls / threads * threads) / (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0)
    end
  end
  median = rates.transform_values { |v| v.sort[v.size / 2] }
  puts format("%2d threads, %d calls x %d rounds: raw %6.0f ops/s, guard.run %6.0f ops/s, guard.run/raw %.2fx",
              threads, calls, rounds, median["raw"], median["guard.run"], median["guard.run"] / median["raw"])
end
