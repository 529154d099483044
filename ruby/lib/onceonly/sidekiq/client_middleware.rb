# frozen_string_literal: true

module Onceonly
  module Sidekiq
    # Client middleware, installed by the guard: before a guarded job reaches
    # Redis, its key and payload are checked (a bad one raises
    # Onceonly::InvalidInput naming the problem, and nothing is written) and
    # its record is written queued (enqueue.sql; due at the job's `at` for
    # perform_in). Sidekiq's fetch drops the job of a process that dies before
    # it claims; the queued record is what lets the re-drive push such a job
    # again. The same key with another payload is refused here
    # (Onceonly::PayloadMismatch); the same payload again is a no-op. A job
    # guarded with `record_at_push: false` is only checked (one write less
    # per job; a job dropped before its claim is then not re-driven).
    class ClientMiddleware
      def call(worker_class, job, _queue, _redis_pool)
        klass = self.class.job_class(worker_class)
        record(klass.onceonly_config, job) if klass.respond_to?(:onceonly_config)
        yield
      end

      def record(config, job)
        key = config.key_for(job["args"])
        payload = config.payload_for(job["args"])
        return unless config.record_at_push

        store = config.store || Sidekiq.store
        delay_ms = job["at"] ? [((job["at"].to_f - Time.now.to_f) * 1000).round, 0].max : 0
        found = store.op_enqueue(job_type: config.spec.job_type, op_key: key, fingerprint: payload.fingerprint,
                                 payload: payload.json, delay_ms: delay_ms)
        return if found == true || found.fingerprint == payload.fingerprint

        raise PayloadMismatch.new(job_type: config.spec.job_type, op_key: key,
                                  stored: found.fingerprint, offered: payload.fingerprint)
      end

      # The class, or nil for one this process does not know (not ours to check).
      def self.job_class(worker_class)
        return worker_class unless worker_class.is_a?(String)

        Object.const_get(worker_class)
      rescue NameError
        nil
      end
    end
  end
end
