# frozen_string_literal: true

module Onceonly
  # The operations every store runs, one conditional statement each, in the
  # same shapes as the Rust Store trait (crates/onceonly/src/store.rs). A
  # store decides nothing: it reports what the database did (affected rows,
  # the row as it stands) and the Guard decides. Subclasses bind the
  # statements to their driver (SqliteStore, PgStore).
  #
  # Every statement takes the clock offset (ms) as parameter 1; tests move it
  # (`advance_clock`) to expire leases instead of sleeping. Calls take an
  # optional `conn:` (the user's connection, for local effects); without one
  # they run on the store's own pool.
  class Store
    INT_COLUMNS = %w[token attempts due_at claimed_at lease_until created_at updated_at
                     completed_at now id at version attempt retry_after_ms].freeze

    attr_reader :url

    # The clock shift in ms added to the database's clock (0 in production).
    def clock_offset_ms
      @clock_mutex.synchronize { @clock_offset_ms }
    end

    # Moves this store's clock forward by `ms` (tests).
    def advance_clock(ms)
      @clock_mutex.synchronize { @clock_offset_ms += Integer(ms) }
    end

    def initialize(url)
      @url = url
      @clock_offset_ms = 0
      @clock_mutex = Mutex.new
    end

    # Insert the record claimed, or claim it if queued, due and of the same
    # payload. Returns [:claimed, Claim] or [:existing, Snapshot].
    def op_claim(job_type:, op_key:, fingerprint:, payload:, owner:, lease_ms:, conn: nil)
      with_conn(conn) do |c|
        row = rows(c, :claim, [job_type, op_key, owner, fingerprint, payload, lease_ms]).first
        next [:claimed, Claim.from_row(row)] if row

        snap = get_on(c, job_type, op_key)
        raise NotFound, "#{job_type}:#{op_key} conflicted on claim but is gone (purged meanwhile?)" unless snap

        [:existing, snap]
      end
    end

    # Moves a claim whose lease is over to a new token, in the state the
    # policy chose ("claimed", "held" or "failed"). The new Claim, or nil
    # when another worker moved the row first.
    def op_take_over(job_type:, op_key:, stale_token:, to:, owner:, lease_ms:, reason:)
      with_conn(nil) do |c|
        row = rows(c, :take_over, [job_type, op_key, stale_token, to, owner, lease_ms, reason]).first
        row && Claim.from_row(row)
      end
    end

    # One fenced transition: only from state `from` with `token`. True when
    # the row changed (1 affected row), false when it is not ours or not in `from`.
    def op_move(job_type:, op_key:, token:, from:, to:, unless_cancel_requested: false,
                external_ref: nil, result: nil, error: nil, retry_after_ms: nil, conn: nil)
      args = [job_type, op_key, token, from, to, external_ref, result, error,
              flag(unless_cancel_requested), retry_after_ms || 0]
      changed = with_conn(conn) { |c| exec(c, :move, args) }
      raise DatabaseError, "move.sql changed #{changed} rows of #{job_type}:#{op_key}" if changed > 1

      changed == 1
    end

    # Renews a live claim's lease: { lease_until:, cancel_requested: }, or nil
    # when the claim is no longer ours.
    def op_heartbeat(job_type:, op_key:, token:, lease_ms:)
      row = with_conn(nil) { |c| rows(c, :heartbeat, [job_type, op_key, token, lease_ms]).first }
      row && { lease_until: row["lease_until"], cancel_requested: [true, 1, "t"].include?(row["cancel_requested"]) }
    end

    # Marks a live claim cancel-requested; true when the row changed.
    def op_request_cancel(job_type:, op_key:, token:)
      with_conn(nil) { |c| exec(c, :request_cancel, [job_type, op_key, token]) } == 1
    end

    # The record with the database's clock (a Snapshot), or nil.
    def op_get(job_type, op_key, conn: nil)
      with_conn(conn) { |c| get_on(c, job_type, op_key) }
    end

    # Records, oldest update first.
    def op_list(job_type: nil, state: nil, lease_expired: false, limit: nil)
      with_conn(nil) do |c|
        rows(c, list_query(job_type, state, lease_expired),
             [job_type, state, flag(lease_expired), limit_arg(limit)]).map { |r| Record.from_row(r) }
      end
    end

    # Inserts a queued record unless one exists: true when inserted, else the existing Record.
    def op_enqueue(job_type:, op_key:, fingerprint:, payload:, delay_ms: 0, conn: nil)
      with_conn(conn) do |c|
        next true if exec(c, :enqueue, [job_type, op_key, fingerprint, payload, delay_ms]) == 1

        get_on(c, job_type, op_key)&.record or raise NotFound, "#{job_type}:#{op_key} is gone"
      end
    end

    # Appends one event to the audit trail, timed by the database's clock;
    # `attempt` and `retry_after_ms` only on a release.
    def op_audit(job_type:, op_key:, event:, actor:, token:, from: nil, to: nil, detail: nil,
                 attempt: nil, retry_after_ms: nil)
      with_conn(nil) do |c|
        exec(c, :audit, [job_type, op_key, event, actor, token, from, to, detail, attempt, retry_after_ms])
      end
    end

    # The audit trail of one operation, oldest first (AuditEvent).
    def op_history(job_type, op_key)
      with_conn(nil) { |c| rows(c, :history, [job_type, op_key], clock: false).map { |r| AuditEvent.from_row(r) } }
    end

    # The database's clock now, in ms (with the offset).
    def now
      with_conn(nil) { |c| rows(c, :now, []).first.fetch("now") }
    end

    private

    def get_on(conn, job_type, op_key)
      row = rows(conn, :get, [job_type, op_key]).first
      row && Snapshot.new(Record.from_row(row), row["now"])
    end

    def list_query(_job_type, _state, _lease_expired)
      :list
    end

    # Runs `name` with the clock offset as parameter 1, then `args`; the rows as
    # hashes by column name, integer columns as Integers.
    def rows(conn, name, args, clock: true)
      params = clock ? [clock_offset_ms, *args] : args
      driver_rows(conn, statement(name), params).map do |row|
        INT_COLUMNS.each { |col| row[col] = Integer(row[col]) if row[col].is_a?(String) }
        row
      end
    end

    # Runs `name`; the affected-row count.
    def exec(conn, name, args, clock: true)
      driver_exec(conn, statement(name), clock ? [clock_offset_ms, *args] : args)
    end
  end
end

module Onceonly
  class Store
    # Yields a connection of the store's own pool (a SQLite3::Database or a
    # PG::Connection), e.g. for a local effect without a connection of its own.
    def with_connection(&block)
      with_conn(nil, &block)
    end
  end
end
