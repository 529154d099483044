# frozen_string_literal: true

# The benchmark's two jobs, the same effect (a counter in Redis) with and
# without the guard. Loaded by the Sidekiq processes and the driver.
$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "onceonly/sidekiq"

module Bench
  RUN = ENV.fetch("ONCEONLY_BENCH_RUN")

  def self.done(kind, enqueued_at)
    now = Time.now.to_f
    Sidekiq.redis do |r|
      r.pipelined do |p|
        p.incr("bench:#{RUN}:#{kind}:done")
        p.rpush("bench:#{RUN}:#{kind}:latency", ((now - enqueued_at) * 1000).round(3))
        p.set("bench:#{RUN}:#{kind}:last", now)
      end
    end
  end

  # The effect both jobs do: one Redis counter per key.
  def self.effect(key)
    Sidekiq.redis { |r| r.hincrby("bench:#{RUN}:effects", key, 1) }
  end

  class PlainJob
    include Sidekiq::Job
    sidekiq_options queue: "bench", retry: false

    def perform(key, enqueued_at)
      Bench.effect(key)
      Bench.done("plain", enqueued_at)
    end
  end

  class GuardedJob
    include Sidekiq::Job
    sidekiq_options queue: "bench", retry: false
    include Onceonly::Sidekiq.guard(job_type: "bench-#{RUN}", key: 0, effect: :keyed, lease: 30, timeout: 10)

    def perform(key, enqueued_at)
      Bench.effect(key)
      Bench.done("guarded", enqueued_at)
    end
  end

  # The guard without the record written at push (one write less per job).
  class GuardedClaimOnlyJob
    include Sidekiq::Job
    sidekiq_options queue: "bench", retry: false
    include Onceonly::Sidekiq.guard(job_type: "bench-#{RUN}-claim-only", key: 0, effect: :keyed, lease: 30,
                                    timeout: 10, record_at_push: false)

    def perform(key, enqueued_at)
      Bench.effect(key)
      Bench.done("claim-only", enqueued_at)
    end
  end
end
Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)
