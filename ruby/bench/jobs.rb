# frozen_string_literal: true

# The benchmark's two jobs, the same effect (a counter in Redis) with and
# without the guard. Loaded by the Sidekiq processes and the driver.
$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "onceonly/sidekiq"
require_relative "raw"

module Bench
  RUN = ENV.fetch("ONCEONLY_BENCH_RUN")

  # Statements this thread sent since its last job, counted at the job's end
  # (a guarded job's completion lands in the next job's count).
  def self.sent_since_last
    now = Bench.sent_here
    last = Thread.current[:bench_sent] || 0
    Thread.current[:bench_sent] = now
    now - last
  end

  def self.done(kind, enqueued_at)
    now = Time.now.to_f
    sent = sent_since_last
    Sidekiq.redis do |r|
      r.pipelined do |p|
        p.incr("bench:#{RUN}:#{kind}:done")
        p.incrby("bench:#{RUN}:#{kind}:sent", sent)
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

  # The guard's statements run raw in the job (claim, effect, completion).
  class RawJob
    include Sidekiq::Job
    sidekiq_options queue: "bench", retry: false

    def perform(key, enqueued_at)
      Raw.claim_and_complete(ENV.fetch("ONCEONLY_DB"), "bench-#{RUN}-raw", key, Onceonly::Payload.from_value({ "args" => [key, enqueued_at] })) do
        Bench.effect(key)
        Bench.done("raw", enqueued_at)
        { "ok" => true }
      end
    end
  end

  # The same with the record written raw at push (enqueue.sql), as the guard's default.
  class RawPushJob
    include Sidekiq::Job
    sidekiq_options queue: "bench", retry: false

    def perform(key, enqueued_at)
      Raw.claim_and_complete(ENV.fetch("ONCEONLY_DB"), "bench-#{RUN}-raw-push", key, Onceonly::Payload.from_value({ "args" => [key, enqueued_at] })) do
        Bench.effect(key)
        Bench.done("raw-push", enqueued_at)
        { "ok" => true }
      end
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
