# frozen_string_literal: true

module Onceonly
  module Sidekiq
    # Sidekiq's open-source fetch (BRPOP) drops the job of a process that
    # dies: nothing redelivers it, so its claim would stay stale for ever.
    # The re-drive pushes such jobs again from what the record holds (the
    # perform arguments), and the guard settles each by its policy (lookup,
    # hold, at most one extra, at most one missing). It also pushes queued
    # operations overdue by more than their lease (a release whose Sidekiq
    # retry was lost with its process).
    #
    # Run it as a command (bin/onceonly-redrive), as a Sidekiq job
    # (RedriveJob, from any scheduler), or inside every Sidekiq process
    # (Redrive.every(30) in configure_server; one process per interval acts).
    module Redrive
      LOCK = "onceonly:redrive:lock"
      MARK = "onceonly:redrive:pushed:"

      # One job pushed again.
      Pushed = Struct.new(:job_type, :op_key, :state, :token, :jid, keyword_init: true)

      module_function

      # Every guarded job class loaded: Sidekiq jobs, and ActiveJob jobs
      # (Onceonly::ActiveJob) when they run on the Sidekiq adapter.
      def guarded_classes
        classes = Sidekiq.registry.values
        classes += Onceonly::ActiveJob.registry.values if defined?(Onceonly::ActiveJob)
        classes
      end

      # Pushes the stale and overdue operations of `classes` (default: every
      # guarded job class loaded). Each record is pushed at most once per
      # lease for the same token (a Redis mark), so runs close together do
      # not pile duplicates up (duplicates would be deduplicated anyway).
      def run(classes: guarded_classes)
        classes.flat_map do |klass|
          config = klass.onceonly_config
          store = config.store || Sidekiq.store
          job_type = config.spec.job_type
          now = store.now
          stale = store.op_list(job_type: job_type, state: "claimed", lease_expired: true)
          overdue = store.op_list(job_type: job_type, state: "queued").select do |r|
            (r.due_at || r.updated_at) + config.spec.lease_ms <= now
          end
          (stale + overdue).filter_map { |record| push(klass, record, config.spec.lease_ms) }
        end
      end

      # Pushes `record`'s job again unless it was pushed within the lease.
      def push(klass, record, lease_ms)
        args = args_of(record)
        unless args
          Sidekiq.logger.warn("onceonly: re-drive cannot push #{record.job_type}:#{record.op_key}: its payload " \
                              "is not the {\"args\": [...]} a guarded Sidekiq job stores")
          return nil
        end
        mark = "#{MARK}#{record.job_type}:#{record.op_key}:#{record.state}:#{record.token}"
        return nil unless ::Sidekiq.redis { |r| r.set(mark, "1", nx: true, px: [lease_ms, 1000].max) }

        jid =
          if klass.respond_to?(:onceonly_redrive_push) # an ActiveJob job: through its adapter
            klass.onceonly_redrive_push(args)
          else
            ::Sidekiq::Client.push("class" => klass, "args" => args, "queue" => klass.get_sidekiq_options["queue"])
          end
        return nil unless jid # not pushed (said why); tried again after the mark's lease
        Sidekiq.logger.info("onceonly: re-drive pushed #{record.job_type}:#{record.op_key} (#{record.state}, " \
                            "token #{record.token}) as job #{jid}")
        Pushed.new(job_type: record.job_type, op_key: record.op_key, state: record.state, token: record.token, jid: jid)
      end

      def args_of(record)
        value = record.payload && JSON.parse(record.payload)
        value.is_a?(Hash) && value["args"].is_a?(Array) ? value["args"] : nil
      rescue JSON::ParserError
        nil
      end

      # Runs the re-drive every `seconds` inside each Sidekiq server process
      # (call it in Sidekiq.configure_server); a Redis lock lets one process
      # act per interval.
      def every(seconds)
        interval = Duration.ms(seconds, "re-drive interval") / 1000.0
        raise InvalidInput, "re-drive interval must be above zero" unless interval.positive?

        ::Sidekiq.on(:startup) { start(interval) }
        ::Sidekiq.on(:shutdown) { @poller&.kill }
      end

      def start(interval)
        @poller = Thread.new do
          loop do
            sleep(interval * (0.5 + rand)) # spread over the processes
            begin
              run if ::Sidekiq.redis { |r| r.set(LOCK, Process.pid.to_s, nx: true, px: (interval * 900).to_i) }
            rescue StandardError => e
              Sidekiq.logger.warn("onceonly: re-drive failed (#{e.class}: #{e.message}); next try in #{interval}s")
            end
          end
        end
      end
    end

    # The re-drive as a Sidekiq job, for any scheduler (sidekiq-cron,
    # sidekiq-scheduler, cron calling a push): RedriveJob.perform_async.
    class RedriveJob
      include ::Sidekiq::Job

      def perform
        Redrive.run.size
      end
    end
  end
end
