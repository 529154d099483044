# frozen_string_literal: true

# The replay's jobs as ActiveJob jobs on the Sidekiq adapter
# (`onceonly-replay --framework activejob`): the same bodies as the Sidekiq
# jobs of jobs.rb, guarded with Onceonly::ActiveJob, a local effect's row
# written through an ActiveRecord model inside the job's ActiveRecord
# transaction, on the replay's database.
require "onceonly/active_job"

module Onceonly
  module Replay
    module Jobs
      # The replay's effect rows, through the ORM.
      class EffectRow < ::ActiveRecord::Base
        self.table_name = TABLE
        self.primary_key = nil
      end

      module_function

      # ActiveRecord's URL for the replay's onceonly URL (the same database).
      def active_record_config(db_url)
        case db_url
        when /\Asqlite:/ then require("onceonly/stores/sqlite") && "sqlite3:#{SqliteStore.path_of(db_url)}"
        when /\A(mysql|mariadb):/ then { url: db_url.sub(/\A(mysql|mariadb):/, "mysql2:"), variables: { time_zone: "+00:00" } }
        else db_url
        end
      end
    end

    # The guarded ActiveJob jobs' body; the guard wraps it (around_perform).
    class GuardedActiveJob < ::ActiveJob::Base
      include Onceonly::ActiveJob
      queue_as Jobs::QUEUE

      def perform(op_key, data)
        kind = self.class.kind
        job_type = self.class.onceonly_config.spec.job_type
        if kind == "local" # in the guard's ActiveRecord transaction, with the claim and the completion
          sleep(data["delay_ms"] / 1000.0) if data["delay_ms"]
          Jobs::EffectRow.create!(job_type: job_type, op_key: op_key)
          return { "row" => op_key }
        end
        Jobs.act(kind, job_type, op_key, data)
      end

      def onceonly_lookup(ctx)
        id = Jobs.redis { |r| r.get(Jobs.rkey(:item, ctx.idempotency_key)) }
        id && Onceonly::Done.new(external_ref: id, result: { "id" => id })
      end

      def onceonly_withdraw(ctx, _external_ref)
        Jobs.redis { |r| r.del(Jobs.rkey(:item, ctx.idempotency_key)) }
        true
      end
    end

    # The naive ActiveJob jobs: read state, then act, then mark done.
    class NaiveActiveJob < ::ActiveJob::Base
      queue_as Jobs::QUEUE

      def perform(op_key, data)
        kind = self.class.kind
        job_type = Jobs.job_type(kind, naive: true)
        done = Jobs.rkey(:naive_done, job_type, op_key)
        return if Jobs.redis { |r| r.exists?(done) }

        Jobs.crash_point(job_type, op_key, :after_claim)
        if kind == "local"
          Jobs::EffectRow.create!(job_type: job_type, op_key: op_key)
        else
          Jobs.act(kind, job_type, op_key, data.merge("cancel_probe" => false))
        end
        Jobs.crash_point(job_type, op_key, :after_effect)
        Jobs.redis { |r| r.set(done, "1") }
      end
    end

    module Jobs
      def self.build_active_job!
        ::ActiveJob::Base.queue_adapter = :sidekiq
        ::ActiveJob::Base.logger = Logger.new($stdout, level: Logger::WARN)
        ::ActiveRecord::Base.establish_connection(active_record_config(ENV.fetch("ONCEONLY_DB")))
        KINDS.each do |kind, (effect, policy)|
          cname = kind.split("-").map(&:capitalize).join
          guarded = Class.new(GuardedActiveJob)
          Replay.const_set("GuardedAj#{cname}", guarded)
          guarded.define_singleton_method(:kind) { kind }
          guarded.guarded(job_type: job_type(kind), key: 0, effect: effect, on_stale: policy,
                          lease: LEASE_MS / 1000.0, timeout: LEASE_MS / 2000.0)
          naive = Class.new(NaiveActiveJob)
          Replay.const_set("NaiveAj#{cname}", naive)
          naive.define_singleton_method(:kind) { kind }
          GUARDED[kind] = guarded
          NAIVE[kind] = naive
        end
        Onceonly::ActiveJob.fault_hook = Onceonly::Sidekiq.fault_hook
        Onceonly::ActiveJob.on_outcome = Onceonly::Sidekiq.on_outcome
      end
    end
  end
end
