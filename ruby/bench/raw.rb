# frozen_string_literal: true

# The guard's own statements run raw through `pg` (no guard logic), and a
# count of every statement sent, for the benchmarks' baselines. Each thread
# has its own connection, each statement is prepared once on it.
require "pg"
require "onceonly"
require "onceonly/stores/postgres"

module Bench
  module Raw
    STATEMENTS = %i[claim move enqueue].freeze

    module_function

    def sql(name)
      @sql ||= STATEMENTS.to_h { |n| [n, Onceonly::PgStore.in_schema(Onceonly::SQL.query("postgres", n.to_s), "onceonly")] }
      @sql.fetch(name)
    end

    def conn(url)
      Thread.current[:bench_raw_conn] ||= PG.connect(url).tap do |c|
        STATEMENTS.each { |n| c.prepare("bench_#{n}", sql(n)) }
      end
    end

    # claim.sql, the block, then move.sql (the completion): what a guarded
    # job must send, with nothing else.
    def claim_and_complete(url, job_type, key, payload)
      c = conn(url)
      Bench.sent!
      token = c.exec_prepared("bench_claim", [0, job_type, key, "bench", payload.fingerprint, payload.json, 30_000])
               .getvalue(0, 0)
      result = yield
      Bench.sent!
      moved = c.exec_prepared("bench_move", [0, job_type, key, token, "claimed", "completed", nil,
                                              JSON.generate(result), nil, false, 0]).cmd_tuples
      raise "raw completion moved #{moved} rows" unless moved == 1

      result
    end

    # enqueue.sql, as the guard's client middleware writes the record at push.
    def enqueue(url, job_type, key, payload)
      Bench.sent!
      inserted = conn(url).exec_prepared("bench_enqueue", [0, job_type, key, payload.fingerprint, payload.json, 0]).cmd_tuples
      raise "raw enqueue inserted #{inserted} rows" unless inserted == 1
    end
  end

  # Statements sent by this process (the store's and the raw ones), and by this thread.
  @sent = 0
  @sent_lock = Mutex.new

  def self.sent!
    Thread.current[:bench_sent_here] = (Thread.current[:bench_sent_here] || 0) + 1
    @sent_lock.synchronize { @sent += 1 }
  end

  def self.sent
    @sent_lock.synchronize { @sent }
  end

  def self.sent_here
    Thread.current[:bench_sent_here] || 0
  end

  # Counts each statement the store sends.
  module CountStatements
    def driver_rows(...)
      Bench.sent!
      super
    end

    def driver_exec(...)
      Bench.sent!
      super
    end
  end
  Onceonly::PgStore.prepend(CountStatements)
end
