# frozen_string_literal: true

module Onceonly
  module ActiveJob
    # The job as the guard's effect: perform (the rest of the callback chain),
    # and the job's optional onceonly_lookup(ctx) and onceonly_withdraw(ctx, external_ref).
    class JobEffect
      def initialize(job, body)
        @job = job
        @body = body
      end

      def perform(ctx)
        @job.onceonly = Context.new(ctx, nil)
        @body.call
      end

      # A missing method is an answer the guard records (lookup unavailable,
      # withdraw failed), never an exception that escapes the guard.
      def lookup(ctx)
        raise Onceonly::Error, "#{@job.class.name} defines no onceonly_lookup(ctx)" unless @job.respond_to?(:onceonly_lookup)

        @job.onceonly_lookup(ctx)
      end

      def withdraw(ctx, external_ref)
        raise Onceonly::Error, "#{@job.class.name} defines no onceonly_withdraw(ctx, external_ref)" unless @job.respond_to?(:onceonly_withdraw)

        @job.onceonly_withdraw(ctx, external_ref)
      end
    end

    # One perform of a guarded job, and what ActiveJob does next by its outcome.
    class Delivery
      def initialize(job)
        @job = job
        @config = job.class.onceonly_config
      end

      # Runs `body` (the around_perform block) under the guard. Returns the
      # result (the stored one for a repeat), or nil when the job ends without
      # running it; a retry-later enqueues the job again through retry_job.
      def run(body)
        guard = @job.class.onceonly_guard
        key = @config.key_for(@job.arguments)
        payload = @config.payload_for(@job.arguments)
        outcome =
          begin
            if @config.spec.effect == :local
              run_local(guard, key, payload, body)
            else
              guard.run(key, payload, JobEffect.new(@job, body))
            end
          rescue Error => e
            Onceonly::ActiveJob.on_outcome&.call(@job.class, key, e)
            raise
          ensure
            @job.onceonly = nil
          end
        Onceonly::ActiveJob.on_outcome&.call(@job.class, key, outcome)
        settle(key, outcome)
      end

      private

      # Inside ActiveRecord's transaction on the model's connection: the
      # claim, the job's writes through its models and the completion commit
      # together or roll back together. Called inside a transaction of the
      # caller's (perform_now in a transaction block), it joins it: the
      # caller's commit decides.
      def run_local(guard, key, payload, body)
        model = @config.model
        model.transaction do
          connection = model.connection
          connection.materialize_transactions # BEGIN now: the claim is the first write in it
          guard.run_local_in(raw_connection(connection), key, payload) do |raw, ctx|
            @job.onceonly = Context.new(ctx, raw)
            body.call
          end
        end
      end

      # The driver's connection under ActiveRecord's. A SQLite one waits for a
      # lock in Ruby (SqliteStore.wait_in_ruby), not in SQLite's busy timeout,
      # which holds the GVL: under Sidekiq's threads, the thread holding the
      # write lock would stop with the one waiting for it.
      def raw_connection(connection)
        raw = connection.raw_connection
        if defined?(::SQLite3::Database) && raw.is_a?(::SQLite3::Database) && !raw.instance_variable_get(:@onceonly_waits)
          require "onceonly/stores/sqlite"
          SqliteStore.wait_in_ruby(raw)
          raw.instance_variable_set(:@onceonly_waits, true)
        end
        raw
      end

      def settle(key, outcome)
        name = "#{@config.spec.job_type}:#{key}"
        log = @job.logger || Onceonly::ActiveJob.logger
        case outcome
        when Outcome::Done
          log.info("onceonly: #{name} #{Outcome.describe(outcome)}") if outcome.repeat
          outcome.result
        when Outcome::InProgress
          # Its owner completes it; if the owner dies, the claim passes its
          # lease and the re-drive (or the adapter's redelivery) brings the
          # job back to settle it by the policy. No retry loop meanwhile.
          log.info("onceonly: #{name} is #{Outcome.describe(outcome)}; left to its owner (the re-drive brings " \
                   "it back if the owner dies)")
          nil
        when Outcome::NotDue, Outcome::RetryLater
          wait = retry_in(key, outcome)
          log.info("onceonly: #{name}: #{Outcome.describe(outcome)}; enqueued again in #{wait}s")
          @job.retry_job(wait: wait)
          nil
        when Outcome::Held
          log.warn("onceonly: #{name} is held for a person (not retried): #{outcome.reason}")
          nil
        when Outcome::Failed, Outcome::WithdrawFailed
          log.error("onceonly: #{name} #{Outcome.describe(outcome)} (not retried)")
          nil
        when Outcome::Cancelled
          log.info("onceonly: #{name} #{Outcome.describe(outcome)}")
          nil
        end
      end

      # Seconds until the operation is due again (at least 1): a release's
      # backoff is read back from the record (one read, on this path only),
      # so the job does not come back early only to find it not due.
      def retry_in(key, outcome)
        due_at, now =
          if outcome.is_a?(Outcome::NotDue) then [outcome.due_at, @config.store.now]
          else
            snap = @config.store.op_get(@config.spec.job_type, key)
            [snap&.record&.due_at, snap&.now]
          end
        return 1 unless due_at && now

        [((due_at - now) / 1000.0).ceil, 1].max
      end
    end
  end
end
