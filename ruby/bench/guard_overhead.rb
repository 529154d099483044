#!/usr/bin/env ruby
# frozen_string_literal: true

# The guard's own code per call, without a database: guard.run on a store
# that answers from memory (a new claim, a completion that moves), so what
# is left is the guard (its decisions, context, outcome). Objects allocated
# and microseconds per call, median of rounds.
#
#   ruby ruby/bench/guard_overhead.rb [--lib DIR] [--calls 20000] [--rounds 5]

require "optparse"
opts = { lib: File.expand_path("../lib", __dir__), calls: 20_000, rounds: 5 }
OptionParser.new do |o|
  o.on("--lib DIR", "The onceonly lib to load (default this checkout's)") { |v| opts[:lib] = File.expand_path(v) }
  o.on("--calls N", Integer) { |v| opts[:calls] = v }
  o.on("--rounds N", Integer) { |v| opts[:rounds] = v }
end.parse!
$LOAD_PATH.unshift opts[:lib]
require "onceonly"

# Claims every key new and moves every claim.
class MemoryStore < Onceonly::Store
  def initialize
    super("memory://")
    @claim = Onceonly::Claim.new(token: 1, attempts: 1, claimed_at: 0, lease_until: 30_000)
  end

  def op_claim(**) = [:claimed, @claim]
  def op_move(**) = true
end

guard = Onceonly::Guard.new(MemoryStore.new, Onceonly::JobSpec.new(job_type: "bench.overhead", effect: :keyed))
payload = Onceonly::Payload.from_value({ "args" => [1] })
result = { "ok" => true }
2000.times { |i| guard.run("w#{i}", payload) { result } } # warm up
allocs = []
micros = []
opts[:rounds].times do
  keys = Array.new(opts[:calls]) { |i| "k#{i}" }
  GC.start
  GC.disable
  before = GC.stat(:total_allocated_objects)
  t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  keys.each { |k| guard.run(k, payload) { result } }
  elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0
  allocs << (GC.stat(:total_allocated_objects) - before).fdiv(opts[:calls])
  GC.enable
  micros << elapsed * 1e6 / opts[:calls]
end
median = ->(v) { v.sort[v.size / 2] }
puts format("guard.run on a memory store (%s): %.1f objects, %.1f us per call (median of %d x %d)",
            opts[:lib], median.(allocs), median.(micros), opts[:rounds], opts[:calls])
