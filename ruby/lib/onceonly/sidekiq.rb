# frozen_string_literal: true

require "sidekiq"
require "onceonly"

module Onceonly
  # Sidekiq integration: guard a job with one line, re-drive stale claims.
  #
  #   require "onceonly/sidekiq"
  #   Onceonly::Sidekiq.store = Onceonly.connect(ENV.fetch("ONCEONLY_DB"))
  #
  #   class SendReceipt
  #     include Sidekiq::Job
  #     include Onceonly::Sidekiq.guard(key: ->(order_id, _email) { "order-#{order_id}" },
  #                                     effect: :opaque, on_stale: :hold, lease: "30s", timeout: "10s")
  #     def perform(order_id, email) = Mailer.receipt(order_id, email)
  #   end
  #
  # What a delivery does on each outcome is in docs/sidekiq.md.
  module Sidekiq
    # Raised to hand a job back to Sidekiq's retry (with a delay, never a busy
    # loop): another worker holds a live claim, or the operation is released
    # and not due yet. `retry_in` is the delay in seconds the guard suggests.
    class RetryLater < Onceonly::Error
      attr_reader :retry_in, :outcome

      def initialize(message, retry_in:, outcome:)
        @retry_in = retry_in
        @outcome = outcome
        super(message)
      end
    end

    class << self
      attr_writer :store
      # Called as hook.(point, ctx) at :after_claim and :after_effect (the replay harness).
      attr_accessor :fault_hook
      # Called as hook.(job_class, op_key, outcome_or_error) after each
      # delivery of a guarded job (metrics, the replay harness).
      attr_accessor :on_outcome

      # The store every guarded job uses unless it names its own (default:
      # Onceonly.connect(ENV["ONCEONLY_DB"], pool: Sidekiq's concurrency) on
      # first use: a connection per job thread, so no thread waits for one).
      def store
        @store ||= begin
          url = ENV["ONCEONLY_DB"]
          raise InvalidInput, "no onceonly store: set Onceonly::Sidekiq.store = Onceonly.connect(URL) or ONCEONLY_DB" unless url

          Onceonly.connect(url, pool: pool_size)
        end
      end

      # One store connection per Sidekiq job thread (its -c, default 10 in Sidekiq 6; 5 in Sidekiq 7).
      def pool_size
        concurrency = ::Sidekiq.respond_to?(:default_configuration) ? ::Sidekiq.default_configuration[:concurrency] : ::Sidekiq.options[:concurrency]
        [Integer(concurrency || 5), 1].max
      end

      # Guarded job classes by job type.
      def registry
        @registry ||= {}
      end

      # The module that guards a Sidekiq job: include it in the job class.
      # key: a lambda from the perform arguments to the operation key, or the
      # index of the argument that is the key. job_type: default the class
      # name with "::" as ".". effect: :local, :keyed, :lookup or :opaque;
      # on_stale (opaque): :hold, :at_least_once, :at_most_once; lease,
      # timeout, heartbeat: seconds or "30s"; connection (local effects): a
      # lambda giving the PG::Connection, Mysql2::Client or SQLite3::Database to run the
      # transaction on (default: the store's own), or :active_record (inside
      # ActiveRecord::Base.transaction, on its connection); record_at_push (default
      # true): write the record queued when the job is pushed, so the re-drive
      # also brings back a job dropped before its claim. Raises InvalidInput or
      # TimingError at once, when the class is loaded.
      def guard(key:, effect:, job_type: nil, **options)
        GuardedJob.new(key: key, effect: effect, job_type: job_type, **options)
      end

      # Checks every guarded job's timing rules (docs/DESIGN.md section 4) and
      # Sidekiq's own: its shutdown timeout (-t, default 25s) must be longer
      # than each job's timeout, or a deploy stops jobs mid-effect and leaves
      # their claims to the stale-claim policy. Raises TimingError naming every
      # broken rule. Run before the process consumes (a :startup hook).
      def check_timing!(shutdown_timeout: ::Sidekiq.options[:timeout])
        shutdown_ms = shutdown_timeout && (shutdown_timeout * 1000).round
        broken = registry.values.flat_map do |klass|
          spec = klass.onceonly_config.spec
          Timing.lines(spec.job_type, spec.broken_timing_rules(shutdown_timeout_ms: shutdown_ms))
        end
        raise TimingError, "timing rule broken: #{broken.join('; ')}" unless broken.empty?

        true
      end

      # Installs, once: the client middleware (checks the key and payload and
      # writes the record queued before the job reaches Redis) and the timing
      # check at server startup.
      def install!
        return if @installed

        @installed = true
        ::Sidekiq.client_middleware { |chain| chain.add(ClientMiddleware) unless chain.exists?(ClientMiddleware) }
        ::Sidekiq.on(:startup) { check_timing! }
      end

      # The Sidekiq logger when there is one.
      def logger
        ::Sidekiq.logger || Onceonly.logger
      end
    end
  end
end

require "onceonly/sidekiq/guarded_job"
require "onceonly/sidekiq/client_middleware"
require "onceonly/sidekiq/redrive"
require "onceonly/sidekiq/redis_deprecations"

Onceonly::Sidekiq::RedisDeprecations.install!
