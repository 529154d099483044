#!/usr/bin/env ruby
# frozen_string_literal: true

# What bounding a job by its timeout costs per call, in 1 and 10 threads:
# Timeout.timeout (a thread per call before the timeout gem's 0.4) next to
# Onceonly::Deadline.within (one watcher thread per process).
#
#   ruby ruby/bench/deadline_bench.rb [--calls 2000]
$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "optparse"
require "onceonly"

calls = 2000
OptionParser.new { |o| o.on("--calls N", Integer) { |v| calls = v } }.parse!

def per_call_us(threads, calls, &block)
  t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  Array.new(threads) { Thread.new { calls.times(&block) } }.each(&:join)
  (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0) / calls * 1e6
end

[1, 10].each do |threads|
  puts format("%2d threads: Timeout.timeout (timeout %s) %7.1f us a call per thread, Deadline.within %7.1f us",
              threads, Timeout::VERSION, per_call_us(threads, calls) { Timeout.timeout(10) { nil } },
              per_call_us(threads, calls) { Onceonly::Deadline.within(10) { nil } })
end
