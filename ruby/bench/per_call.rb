# frozen_string_literal: true

# guard.run in one thread, no-op effect (claim + fenced completion per call),
# next to its two statements run raw through `pg`, in alternating rounds.
module Bench
  def self.per_call(store, url, calls, rounds: 3)
    spec = Onceonly::JobSpec.new(job_type: "bench-call-#{RUN}", effect: :keyed)
    guard = Onceonly::Guard.new(store, spec)
    payload = Onceonly::Payload.from_value({ "args" => [1] })
    variants = {
      "raw claim.sql + move.sql (pg, prepared, no guard logic)" =>
        ->(k) { Raw.claim_and_complete(url, "bench-call-#{RUN}-raw", k, payload) { { "ok" => true } } },
      "guard.run (claim, effect, fenced completion)" => ->(k) { guard.run(k, payload) { { "ok" => true } } }
    }
    rates = Hash.new { |h, k| h[k] = [] }
    sent = {}
    rounds.times do |r|
      variants.each do |name, one|
        before = Bench.sent
        t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        calls.times { |i| one.("k#{r}-#{i}") }
        rates[name] << calls / (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0)
        sent[name] = (Bench.sent - before).to_f / calls
      end
    end
    puts "per call, one thread, #{calls} calls x #{rounds} rounds alternating:"
    median = rates.transform_values { |v| v.sort[v.size / 2] }
    median.each { |name, v| puts format("  %-58s %7.0f ops/s  %.2f statements/call", name, v, sent[name]) }
    g, raw = median.values_at("guard.run (claim, effect, fenced completion)", "raw claim.sql + move.sql (pg, prepared, no guard logic)")
    puts format("  guard.run / raw: %.2fx (target >= 0.9)", g / raw)
  end
end
