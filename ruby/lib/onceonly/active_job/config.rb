# frozen_string_literal: true

module Onceonly
  module ActiveJob
    # A job class's guard settings.
    Config = Struct.new(:spec, :key, :own_store, :model, :record_at_push, :max_retries, keyword_init: true) do
      # The store this job's records live in.
      def store
        own_store || Onceonly::ActiveJob.store
      end

      # The operation key of a job with these perform arguments.
      def key_for(arguments)
        raw =
          if key.is_a?(Integer)
            arguments.fetch(key) { raise InvalidInput, "key: argument #{key} is missing" }
          else
            key.call(*arguments)
          end
        raw = raw.to_s unless raw.is_a?(String)
        Keys.validate_op_key!(raw)
      end

      # What onceonly stores and fingerprints: the arguments as ActiveJob
      # serializes them (a record as its GlobalID), which is also what the
      # re-drive enqueues again.
      def payload_for(arguments)
        Payload.from_value({ "args" => ::ActiveJob::Arguments.serialize(arguments) })
      end

      # Before the job reaches its queue (before_enqueue): checks the key and
      # payload (a bad one raises, and nothing is enqueued) and writes the
      # record queued, due at the job's scheduled time. Another payload under
      # the key raises PayloadMismatch; the same again is a no-op.
      def record(job)
        op_key = key_for(job.arguments)
        payload = payload_for(job.arguments)
        return unless record_at_push

        delay_ms = job.scheduled_at ? [((job.scheduled_at.to_f - Time.now.to_f) * 1000).round, 0].max : 0
        found = store.op_enqueue(job_type: spec.job_type, op_key: op_key, fingerprint: payload.fingerprint,
                                 payload: payload.json, delay_ms: delay_ms)
        return if found == true || found.fingerprint == payload.fingerprint

        raise PayloadMismatch.new(job_type: spec.job_type, op_key: op_key,
                                  stored: found.fingerprint, offered: payload.fingerprint)
      end
    end

    # What a guarded job sees as `onceonly` while perform runs: the effect's
    # context and, for a local effect, the raw connection whose transaction
    # holds the claim (ActiveRecord's own: use your models).
    Context = Struct.new(:ctx, :conn) do
      def idempotency_key = ctx.idempotency_key
      def op_key = ctx.op_key
      def token = ctx.token
      def attempt = ctx.attempt
      def cancel_requested? = ctx.cancel_requested?
    end
  end
end
