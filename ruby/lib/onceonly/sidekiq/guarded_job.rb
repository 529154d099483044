# frozen_string_literal: true

module Onceonly
  module Sidekiq
    # A job class's guard settings.
    Config = Struct.new(:spec, :key, :connection, :store, :record_at_push, keyword_init: true) do
      # The operation key of a delivery with these perform arguments.
      def key_for(args)
        raw = key.is_a?(Integer) ? args.fetch(key) { raise InvalidInput, "key: argument #{key} is missing" } : key.call(*args)
        Keys.validate_op_key!(raw.is_a?(String) ? raw : raw.to_s)
      end

      # What onceonly stores and fingerprints: the perform arguments, which is
      # also what the re-drive needs to push the job again.
      def payload_for(args)
        Payload.from_value({ "args" => args })
      end
    end

    # What a guarded job sees as `onceonly` while it acts: the effect's
    # context (key, idempotency_key, token, attempt) and, for a local effect,
    # the connection whose transaction holds the claim.
    Context = Struct.new(:ctx, :conn) do
      def idempotency_key = ctx.idempotency_key
      def op_key = ctx.op_key
      def cancel_requested? = ctx.cancel_requested?
    end

    # The module `Onceonly::Sidekiq.guard(...)` returns. Including it in a job
    # class registers the class, and wraps its perform in the guard.
    class GuardedJob < Module
      def initialize(key:, effect:, job_type:, connection: nil, store: nil, max_retries: 3, record_at_push: true, **timing)
        super()
        unless key.is_a?(Integer) || key.respond_to?(:call)
          raise InvalidInput, "key: must be a lambda from the perform arguments to the operation key, or an argument index"
        end
        raise InvalidInput, "connection: is for local effects only" if connection && effect.to_s != "local"
        unless connection.nil? || connection == :active_record || connection.respond_to?(:call)
          raise InvalidInput, "connection: must be :active_record or a lambda giving a PG::Connection, Mysql2::Client or SQLite3::Database"
        end

        @settings = { key: key, effect: effect, job_type: job_type, connection: connection, store: store,
                      max_retries: max_retries, record_at_push: record_at_push ? true : false, timing: timing }
      end

      def included(base)
        s = @settings
        job_type = s[:job_type] || base.name.to_s.gsub("::", ".")
        spec = JobSpec.new(job_type: job_type, effect: s[:effect], **s[:timing]).validate!
        if (other = Sidekiq.registry[spec.job_type]) && other.name != base.name
          raise InvalidInput, "job type #{spec.job_type} is already guarded by #{other.name}"
        end

        config = Config.new(spec: spec, key: s[:key], connection: s[:connection], store: s[:store],
                            record_at_push: s[:record_at_push]).freeze
        max_retries = s[:max_retries]
        base.define_singleton_method(:onceonly_config) { config }
        base.define_singleton_method(:onceonly_guard) do
          @onceonly_guard ||= Guard.new(config.store || Sidekiq.store, config.spec, max_retries: max_retries,
                                        fault_hook: ->(point, ctx) { Sidekiq.fault_hook&.call(point, ctx) })
        end
        base.sidekiq_retry_in { |_count, error| error.is_a?(RetryLater) ? error.retry_in : nil } if base.respond_to?(:sidekiq_retry_in)
        base.prepend(Perform)
        Sidekiq.registry[spec.job_type] = base
        Sidekiq.install!
      end
    end

    # The guard around a job's perform.
    module Perform
      attr_accessor :onceonly

      def perform(*args)
        Delivery.new(self, args).run { super(*args) }
      end
    end

    # The job as the guard's effect: perform, and the job's optional
    # onceonly_lookup(ctx) and onceonly_withdraw(ctx, external_ref).
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
      # withdraw failed), as the Rust guard's defaults: a StandardError, not
      # NotImplementedError, which would escape and leave the claim unrecorded.
      def lookup(ctx)
        raise Onceonly::Error, "#{@job.class.name} defines no onceonly_lookup(ctx)" unless @job.respond_to?(:onceonly_lookup)

        @job.onceonly_lookup(ctx)
      end

      def withdraw(ctx, external_ref)
        raise Onceonly::Error, "#{@job.class.name} defines no onceonly_withdraw(ctx, external_ref)" unless @job.respond_to?(:onceonly_withdraw)

        @job.onceonly_withdraw(ctx, external_ref)
      end
    end

    # One delivery of a guarded job, and what Sidekiq does next by its outcome.
    class Delivery
      def initialize(job, args)
        @job = job
        @args = args
        @config = job.class.onceonly_config
      end

      # Runs the body under the guard. Returns the result (or the stored one
      # for a repeat); raises RetryLater to have Sidekiq retry it later.
      def run(&body)
        guard = @job.class.onceonly_guard
        key = @config.key_for(@args)
        payload = @config.payload_for(@args)
        outcome =
          begin
            if @config.spec.effect == :local
              run_local(guard, key, payload, body)
            else
              guard.run(key, payload, JobEffect.new(@job, body))
            end
          rescue Error => e
            Sidekiq.on_outcome&.call(@job.class, key, e)
            raise
          end
        Sidekiq.on_outcome&.call(@job.class, key, outcome)
        settle(key, outcome)
      end

      private

      def run_local(guard, key, payload, body)
        local = lambda do |conn, ctx|
          @job.onceonly = Context.new(ctx, conn)
          body.call
        end
        return run_local_active_record(guard, key, payload, local) if @config.connection == :active_record

        conn = @config.connection&.call
        guard.run_local(key, payload, conn: conn, &local)
      end

      # Inside ActiveRecord's transaction on its connection, so the job's
      # models commit or roll back with the claim and its completion.
      def run_local_active_record(guard, key, payload, local)
        base = ::ActiveRecord::Base
        base.transaction do
          base.connection.materialize_transactions # BEGIN now: the claim is the first write in it
          guard.run_local_in(base.connection.raw_connection, key, payload, &local)
        end
      end

      def settle(key, outcome)
        name = "#{@config.spec.job_type}:#{key}"
        log = Sidekiq.logger
        case outcome
        when Outcome::Done
          log.info("onceonly: #{name} #{Outcome.describe(outcome)}") if outcome.repeat
          outcome.result
        when Outcome::InProgress
          # Come back once the live claim's lease is over (then it is done or stale).
          left_ms = [outcome.lease_ms - outcome.age_ms, 0].max
          raise RetryLater.new("#{name} is #{Outcome.describe(outcome)}; retried later",
                               retry_in: (left_ms / 1000.0).ceil + 1, outcome: outcome)
        when Outcome::NotDue, Outcome::RetryLater
          raise RetryLater.new("#{name}: #{Outcome.describe(outcome)}; retried later",
                               retry_in: retry_in_for(outcome), outcome: outcome)
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

      # Seconds until the operation is due again: a release's backoff, or a
      # queued record's due time; at least 1.
      def retry_in_for(outcome)
        return [(outcome.retry_after_ms.to_i / 1000.0).ceil, 1].max if outcome.is_a?(Outcome::RetryLater)
        return 1 unless outcome.is_a?(Outcome::NotDue) && outcome.due_at

        [((outcome.due_at - @job.class.onceonly_guard.store.now) / 1000.0).ceil, 1].max
      end
    end
  end
end
