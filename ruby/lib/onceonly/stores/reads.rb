# frozen_string_literal: true

module Onceonly
  # Reading records without the Rust CLI, on the statements the CLI runs
  # (get.sql, operator_held.sql, operator_stuck.sql, history.sql, now.sql):
  #
  #   store.get("SendReceipt", "order-42")     # a Record, as `onceonly inspect` shows it (nil: none)
  #   store.held                                # [Listed], as `onceonly held`, oldest claim first
  #   store.stuck(older_than: "5m")             # [Listed], as `onceonly stuck`: lease over by 5m or more
  #   store.history("SendReceipt", "order-42")  # History, as `onceonly history`
  #
  # `to_h` of each gives the keys and values of the CLI's `--json` lines.
  module Reads
    # One held operation or stuck claim, with the database's clock read after
    # the list (so no age comes out negative), as `onceonly held/stuck --json`.
    Listed = Struct.new(:record, :now) do
      # Since the claim in question was taken (or the record created), ms.
      def age_ms = [now - (record.claimed_at || record.created_at), 0].max

      # The claim's lease, ms (stuck claims only).
      def lease_ms
        record.lease_until - record.claimed_at if stuck? && record.claimed_at && record.lease_until
      end

      # How long ago the lease ran out, ms (stuck claims only).
      def over_lease_ms
        [now - record.lease_until, 0].max if stuck? && record.lease_until
      end

      def stuck? = record.state == "claimed"

      def to_h
        r = record
        { "job" => r.job_type, "key" => r.op_key, "state" => r.state, "token" => r.token, "owner" => r.owner,
          "attempts" => r.attempts, "age_ms" => age_ms, "claimed_at" => Reads.time(r.claimed_at),
          "lease_until" => Reads.time(r.lease_until), "lease_ms" => lease_ms, "over_lease_ms" => over_lease_ms,
          "external_ref" => r.external_ref, "error" => r.error, "cancel_requested" => r.cancel_requested,
          "updated_at" => Reads.time(r.updated_at), "now" => Reads.time(now) }
      end
    end

    # An operation's record and its audit trail (AuditEvent), oldest first.
    History = Struct.new(:record, :events) do
      # The CLI's `history --json` lines: the record, then one hash per event.
      def to_a
        [Reads.record_hash(record).merge("kind" => "record"),
         *events.map { |e| Reads.event_hash(e).merge("kind" => "event") }]
      end
    end

    module_function

    # A time on the database's clock (ms) as the CLI prints it: RFC 3339, UTC, milliseconds.
    def time(ms)
      ms && Time.at(ms / 1000, ms % 1000, :millisecond).utc.strftime("%Y-%m-%dT%H:%M:%S.%LZ")
    end

    # A Record as `onceonly inspect --json` prints it.
    def record_hash(r)
      { "job" => r.job_type, "key" => r.op_key, "state" => r.state, "token" => r.token, "owner" => r.owner,
        "attempts" => r.attempts, "fingerprint" => r.fingerprint, "payload" => r.payload,
        "external_ref" => r.external_ref, "result" => r.result, "cancel_requested" => r.cancel_requested,
        "error" => r.error, "due_at" => time(r.due_at), "claimed_at" => time(r.claimed_at),
        "lease_until" => time(r.lease_until), "created_at" => time(r.created_at),
        "updated_at" => time(r.updated_at), "completed_at" => time(r.completed_at) }
    end

    # An AuditEvent as `onceonly history --json` prints it.
    def event_hash(e)
      { "id" => e.id, "job" => e.job_type, "key" => e.op_key, "at" => time(e.at), "event" => e.event,
        "actor" => e.actor, "token" => e.token, "from_state" => e.from_state, "to_state" => e.to_state,
        "detail" => e.detail, "attempt" => e.attempt, "retry_after_ms" => e.retry_after_ms }
    end

    # The store methods (included in Store).
    module Methods
      # The record of one operation, or nil when there is none.
      def get(job_type, op_key)
        op_get(Keys.validate_job_type!(job_type), Keys.validate_op_key!(op_key))&.record
      end

      # Held operations (waiting for a person), oldest claim first; `job_type`
      # narrows to one type, `limit` and `offset` page.
      def held(job_type: nil, limit: nil, offset: 0)
        page(:operator_held, clock_offset_ms, job_type, limit, offset)
      end

      # Stuck claims (claimed, lease over), oldest claim first. `older_than`
      # (seconds or "5m"): only claims whose lease ran out at least that long
      # ago, i.e. stuck as the database's clock read `older_than` ago.
      def stuck(job_type: nil, older_than: 0, limit: nil, offset: 0)
        page(:operator_stuck, clock_offset_ms - Duration.ms(older_than, "older_than"), job_type, limit, offset)
      end

      # The record and its audit trail, oldest first; NotFound when there is
      # no record (purged, or never enqueued or claimed), as the CLI says.
      def history(job_type, op_key)
        record = get(job_type, op_key)
        raise NotFound, "no operation #{job_type}:#{op_key}: no record, so no history (purged, or never enqueued or claimed)" unless record

        History.new(record, op_history(job_type, op_key))
      end

      private

      # The clock offset as a statement parameter (a store whose driver must
      # be told its type, when the statement does not use it, overrides this).
      def clock_param(ms) = ms

      def page(statement, clock_ms, job_type, limit, offset)
        Keys.validate_job_type!(job_type) if job_type
        unless limit.nil? || (limit.is_a?(Integer) && limit.positive?)
          raise InvalidInput, "limit #{limit.inspect} must be a positive Integer or nil (all)"
        end
        raise InvalidInput, "offset #{offset.inspect} must be an Integer >= 0" unless offset.is_a?(Integer) && !offset.negative?

        with_conn(nil) do |c|
          records = rows(c, statement, [clock_param(clock_ms), job_type, limit_arg(limit), offset], clock: false)
                    .map { |row| Record.from_row(row) }
          now = rows(c, :now, []).first.fetch("now")
          records.map { |r| Listed.new(r, now) }
        end
      end
    end
  end

  class Store
    include Reads::Methods
  end
end
