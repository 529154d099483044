# frozen_string_literal: true

require "active_job"
require "onceonly"
require "onceonly/active_record"

module Onceonly
  # Guards an ActiveJob job: one `guarded` line, and `perform` runs under the
  # guard (an around_perform callback) on every adapter; docs/rails.md.
  #
  #   class ShipOrder < ApplicationJob
  #     include Onceonly::ActiveJob
  #     guarded key: ->(order_id) { "order-#{order_id}" }, effect: :local
  #
  #     def perform(order_id)
  #       Shipment.create!(order_id: order_id)   # commits with the record, or not at all
  #     end
  #   end
  #
  # Inside perform, `onceonly` is the claim's context: onceonly.idempotency_key
  # (JOB_TYPE:KEY, the same on every attempt), onceonly.op_key,
  # onceonly.cancel_requested?.
  module ActiveJob
    extend ::ActiveSupport::Concern

    class << self
      attr_writer :store
      # Called as hook.(point, ctx) at :after_claim and :after_effect (tests).
      attr_accessor :fault_hook
      # Called as hook.(job_class, op_key, outcome_or_error) after each guarded perform (metrics).
      attr_accessor :on_outcome

      # The store every guarded job uses unless it names its own (default: the
      # one on ActiveRecord::Base's database, made on first use, with a
      # connection per Sidekiq job thread under Sidekiq).
      def store
        @store ||= Onceonly::ActiveRecord.store(pool: pool_size)
      end

      def pool_size
        return Onceonly::Sidekiq.pool_size if defined?(Onceonly::Sidekiq)

        5
      end

      # Guarded job classes by job type.
      def registry
        @registry ||= {}
      end

      # Checks every guarded job's timing rules (docs/DESIGN.md section 4),
      # and, given Sidekiq's shutdown timeout, that it is longer than each
      # job's timeout. Raises TimingError naming every broken rule.
      def check_timing!(shutdown_timeout: nil)
        shutdown_ms = shutdown_timeout && (shutdown_timeout * 1000).round
        broken = registry.values.flat_map do |klass|
          spec = klass.onceonly_config.spec
          Timing.lines(spec.job_type, spec.broken_timing_rules(shutdown_timeout_ms: shutdown_ms))
        end
        raise TimingError, "timing rule broken: #{broken.join('; ')}" unless broken.empty?

        true
      end

      # Under Sidekiq, once: the timing check when a server starts, before it
      # consumes (with its shutdown timeout, -t), as for a Sidekiq job.
      def install_sidekiq!
        return if @sidekiq_installed || !defined?(::Sidekiq)

        @sidekiq_installed = true
        require "onceonly/sidekiq"
        ::Sidekiq.on(:startup) { check_timing!(shutdown_timeout: ::Sidekiq.options[:timeout]) }
      end

      def logger
        ::ActiveJob::Base.logger || Onceonly.logger
      end
    end

    included do
      # The claim's context while perform runs (a Context), else nil.
      attr_accessor :onceonly
    end

    class_methods do
      # Guards perform. key: a lambda from the perform arguments to the
      # operation key, or the index of the argument that is the key. effect:
      # :local (inside ActiveRecord's transaction, with the claim and the
      # completion), :keyed, :lookup or :opaque; on_stale (opaque): :hold,
      # :at_least_once, :at_most_once; lease, timeout, heartbeat: seconds or
      # "30s". job_type: default the class name with "::" as ".". model
      # (local): the ActiveRecord class whose connection runs the transaction
      # (default ActiveRecord::Base). record_at_push (default true): write the
      # record queued when the job is enqueued, so the re-drive brings back a
      # job dropped before its claim. store, max_retries: as Guard's. Raises
      # InvalidInput or TimingError at once, when the class is loaded.
      def guarded(key:, effect:, job_type: nil, model: nil, store: nil, max_retries: 3, record_at_push: true, **timing)
        raise InvalidInput, "#{name} is guarded twice" if singleton_methods(false).include?(:onceonly_config)
        if respond_to?(:onceonly_config)
          # Its perform would run under two guards, the inner one meeting the outer one's claim.
          raise InvalidInput, "#{name} inherits the guard of #{superclass.name}: guard one class of the chain"
        end

        unless key.is_a?(Integer) || key.respond_to?(:call)
          raise InvalidInput, "key: must be a lambda from the perform arguments to the operation key, or an argument index"
        end
        raise InvalidInput, "model: is for local effects only" if model && effect.to_s != "local"
        if model && !(model.is_a?(Class) && model <= ::ActiveRecord::Base)
          raise InvalidInput, "model: must be an ActiveRecord class (its connection runs the transaction), got #{model.inspect}"
        end

        spec = JobSpec.new(job_type: job_type || name.to_s.gsub("::", "."), effect: effect, **timing).validate!
        if (other = Onceonly::ActiveJob.registry[spec.job_type]) && other.name != name
          raise InvalidInput, "job type #{spec.job_type} is already guarded by #{other.name}"
        end

        config = Config.new(spec: spec, key: key, own_store: store, model: model || ::ActiveRecord::Base,
                            record_at_push: record_at_push ? true : false, max_retries: Integer(max_retries)).freeze
        define_singleton_method(:onceonly_config) { config }
        around_perform { |job, block| Delivery.new(job).run(block) }
        before_enqueue { |job| job.class.onceonly_config.record(job) }
        Onceonly::ActiveJob.registry[spec.job_type] = self
        Onceonly::ActiveJob.install_sidekiq!
        self
      end

      # The guard of this job type (made on first use, on the job's store).
      def onceonly_guard
        @onceonly_guard ||= Guard.new(onceonly_config.store, onceonly_config.spec,
                                      max_retries: onceonly_config.max_retries,
                                      fault_hook: ->(point, ctx) { Onceonly::ActiveJob.fault_hook&.call(point, ctx) })
      end

      # The re-drive's push (Onceonly::Sidekiq::Redrive): enqueues the job
      # again through its adapter, from the serialized arguments the record
      # holds. Returns the adapter's job id, or nil (logged) when the
      # arguments no longer deserialize (a record of theirs was deleted).
      def onceonly_redrive_push(serialized_args)
        job = new(*::ActiveJob::Arguments.deserialize(serialized_args))
        job.enqueue
        job.provider_job_id || job.job_id
      rescue ::ActiveJob::DeserializationError => e
        Onceonly::ActiveJob.logger.warn("onceonly: re-drive cannot enqueue #{name} again: #{e.message}")
        nil
      end
    end
  end
end

require "onceonly/active_job/config"
require "onceonly/active_job/delivery"
