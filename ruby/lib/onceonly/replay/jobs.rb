# frozen_string_literal: true

# The replay's Sidekiq jobs, loaded by every replay worker process
# (`sidekiq -r onceonly/replay/jobs.rb`) and by the harness that pushes them.
# Configured by the environment the harness sets: ONCEONLY_DB, REDIS_URL,
# ONCEONLY_REPLAY_RUN, ONCEONLY_REPLAY_LEASE_MS.

$LOAD_PATH.unshift File.expand_path("../..", __dir__)
require "securerandom"
require "onceonly/sidekiq"

module Onceonly
  module Replay
    # One guarded and one naive job class per effect kind; an effect
    # destination in Redis that counts what reaches it; crash points that a
    # marker in Redis arms per operation.
    module Jobs
      RUN = ENV.fetch("ONCEONLY_REPLAY_RUN")
      LEASE_MS = Integer(ENV.fetch("ONCEONLY_REPLAY_LEASE_MS", "2000"))
      QUEUE = "replay"
      TABLE = "onceonly_replay_effects"
      KINDS = {
        "local" => [:local, nil], "keyed" => [:keyed, nil], "lookup" => [:lookup, nil],
        "opaque-hold" => [:opaque, :hold], "opaque-at-least-once" => [:opaque, :at_least_once],
        "opaque-at-most-once" => [:opaque, :at_most_once]
      }.freeze

      module_function

      def job_type(kind, naive: false)
        "replay-#{RUN}.#{kind}#{naive ? '.naive' : ''}"
      end

      # A Redis key of this run.
      def rkey(*parts)
        "r:#{RUN}:#{parts.join(':')}"
      end

      def redis(&block)
        ::Sidekiq.redis(&block)
      end

      # Sends to the destination: keyed dedups on the idempotency key; lookup
      # and opaque create an item per send. Every send that creates an item counts.
      def send_item(kind, idem)
        id = "item-#{SecureRandom.hex(4)}"
        redis do |r|
          if kind == "keyed"
            created = r.set(rkey(:item, idem), id, nx: true)
            r.hincrby(rkey(:sends), idem, 1) if created
            created ? id : r.get(rkey(:item, idem))
          else
            r.set(rkey(:item, idem), id)
            r.hincrby(rkey(:sends), idem, 1)
            id
          end
        end
      end

      def mysql?(conn)
        defined?(::Mysql2::Client) && conn.is_a?(::Mysql2::Client)
      end

      # Runs `sql` with `binds` on a Mysql2::Client, prepared and closed
      # again; the rows as arrays.
      def mysql_run(conn, sql, binds)
        stmt = conn.prepare(sql)
        stmt.execute(*binds, as: :array)&.to_a
      ensure
        stmt&.close
      end

      # A local effect: a row in the same database, on the connection given.
      def insert_row(conn, job_type, op_key)
        if conn.respond_to?(:exec_params) # PG::Connection
          conn.exec_params("INSERT INTO #{TABLE} (job_type, op_key) VALUES ($1, $2)", [job_type, op_key])
        elsif Jobs.mysql?(conn)
          Jobs.mysql_run(conn, "INSERT INTO #{TABLE} (job_type, op_key) VALUES (?, ?)", [job_type, op_key])
        else # SQLite3::Database
          conn.execute("INSERT INTO #{TABLE} (job_type, op_key) VALUES (?, ?)", [job_type, op_key])
        end
      end

      # The crash point, if the harness armed one for this operation: `sigkill`
      # ends this process at once (after noting where), `fault` raises.
      def crash_point(job_type, op_key, point)
        marker = rkey(:crash, job_type, op_key)
        armed = redis { |r| r.get(marker) }
        mode, at = armed&.split(":", 2)
        return unless at == point.to_s
        return unless redis { |r| r.del(marker) } == 1 # one crash per arming

        redis { |r| r.set(rkey(:reached, job_type, op_key), JSON.generate("pid" => Process.pid, "point" => at, "at" => Time.now.to_f)) }
        if mode == "sigkill"
          Process.kill(:KILL, Process.pid)
          sleep # the signal is on its way
        end
        raise InjectedCrash, point
      end

      # What the effect does for `data` (delay_ms: widen the race window;
      # cancel_probe: say "sending" and wait for the harness's go).
      def act(kind, job_type, op_key, data, conn: nil)
        sleep(data["delay_ms"] / 1000.0) if data["delay_ms"]
        return insert_row(conn, job_type, op_key) && { "row" => op_key } if kind == "local"

        id = send_item(kind, "#{job_type}:#{op_key}")
        if data["cancel_probe"]
          redis { |r| r.set(rkey(:sending, job_type, op_key), id) }
          deadline = Time.now + 0.8
          sleep 0.01 until redis { |r| r.exists?(rkey(:go, job_type, op_key)) } || Time.now > deadline
        end
        Onceonly::Done.new(external_ref: id, result: { "id" => id })
      end
    end

    # The guarded jobs' body; the guard wraps it.
    class GuardedJob
      include ::Sidekiq::Job
      sidekiq_options queue: Jobs::QUEUE

      def perform(op_key, data)
        Jobs.act(self.class.kind, self.class.onceonly_config.spec.job_type, op_key, data, conn: onceonly.conn)
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

    # The naive jobs: read state, then act, then mark done.
    class NaiveJob
      include ::Sidekiq::Job
      sidekiq_options queue: Jobs::QUEUE

      def perform(op_key, data)
        kind = self.class.kind
        job_type = Jobs.job_type(kind, naive: true)
        done = Jobs.rkey(:naive_done, job_type, op_key)
        return if Jobs.redis { |r| r.exists?(done) }

        Jobs.crash_point(job_type, op_key, :after_claim)
        if kind == "local"
          Onceonly::Sidekiq.store.with_connection { |c| Jobs.insert_row(c, job_type, op_key) }
        else
          Jobs.act(kind, job_type, op_key, data.merge("cancel_probe" => false))
        end
        Jobs.crash_point(job_type, op_key, :after_effect)
        Jobs.redis { |r| r.set(done, "1") }
      end
    end

    module Jobs
      GUARDED = {}
      NAIVE = {}
      # ONCEONLY_REPLAY_FRAMEWORK=activejob: ActiveJob jobs instead (active_job_jobs.rb).
      ACTIVE_JOB = ENV["ONCEONLY_REPLAY_FRAMEWORK"] == "activejob"
      KINDS.each do |kind, (effect, policy)|
        next if ACTIVE_JOB

        cname = kind.split("-").map(&:capitalize).join
        guarded = Class.new(GuardedJob)
        Replay.const_set("Guarded#{cname}", guarded)
        guarded.define_singleton_method(:kind) { kind }
        guarded.include(Onceonly::Sidekiq.guard(job_type: job_type(kind), key: 0, effect: effect, on_stale: policy,
                                                lease: LEASE_MS / 1000.0, timeout: LEASE_MS / 2000.0))
        naive = Class.new(NaiveJob)
        Replay.const_set("Naive#{cname}", naive)
        naive.define_singleton_method(:kind) { kind }
        GUARDED[kind] = guarded
        NAIVE[kind] = naive
      end
    end
  end
end

Onceonly::Sidekiq.fault_hook = lambda do |point, ctx|
  Onceonly::Replay::Jobs.crash_point(ctx.job_type, ctx.op_key, point)
end
Onceonly::Sidekiq.on_outcome = lambda do |job_class, op_key, outcome|
  text = outcome.is_a?(Exception) ? "error: #{outcome.message}" : Onceonly::Outcome.describe(outcome)
  spec = job_class.onceonly_config.spec
  Onceonly::Replay::Jobs.redis { |r| r.rpush(Onceonly::Replay::Jobs.rkey(:outcome, spec.job_type, op_key), text) }
end
Sidekiq.configure_server do |config|
  # Retries come due within a second, not Sidekiq's default poll of 5s per process.
  config.options[:poll_interval_average] = 1
end
Redis.sadd_returns_boolean = false if Redis.respond_to?(:sadd_returns_boolean=)
Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

if Onceonly::Replay::Jobs::ACTIVE_JOB
  require "onceonly/replay/active_job_jobs"
  Onceonly::Replay::Jobs.build_active_job!
end
