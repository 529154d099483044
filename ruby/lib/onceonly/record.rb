# frozen_string_literal: true

module Onceonly
  # Where an operation stands (docs/DESIGN.md section 1).
  STATES = %w[queued claimed completed failed held cancelled].freeze

  # One operation record, as stored. Times are milliseconds on the database's clock.
  Record = Struct.new(
    :job_type, :op_key, :state, :token, :owner, :attempts, :fingerprint, :payload,
    :external_ref, :result, :cancel_requested, :error, :due_at, :claimed_at,
    :lease_until, :created_at, :updated_at, :completed_at,
    keyword_init: true
  ) do
    # Decodes a row of the ops table (a Hash by column name) from either store.
    def self.from_row(row)
      new(**members.to_h { |m| [m, row[m.to_s]] }).tap do |r|
        raise DatabaseError, "unknown state #{r.state.inspect} in the ops table" unless STATES.include?(r.state)

        r.cancel_requested = [true, 1, "t"].include?(r.cancel_requested)
      end
    end

    # The stored result as a Ruby value (nil when there is none).
    def result_value
      result && JSON.parse(result, max_nesting: false)
    rescue JSON::ParserError
      nil
    end

    # True when the claim's lease has run out at `now`.
    def lease_expired?(now)
      lease_until.nil? || lease_until <= now
    end
  end

  # A record with the database's clock when it was read.
  Snapshot = Struct.new(:record, :now)

  # A claim this worker holds: the token every later write names.
  Claim = Struct.new(:token, :attempts, :claimed_at, :lease_until, keyword_init: true) do
    def self.from_row(row)
      new(token: row["token"], attempts: row["attempts"],
          claimed_at: row["claimed_at"], lease_until: row["lease_until"])
    end
  end

  # One audit trail row. `event` is kept as stored, so a name this client does
  # not know (written by a newer one) is read, not refused; `attempt` and
  # `retry_after_ms` are set on a release only.
  AuditEvent = Struct.new(:id, :job_type, :op_key, :at, :event, :actor, :token,
                          :from_state, :to_state, :detail, :attempt, :retry_after_ms,
                          keyword_init: true) do
    def self.from_row(row)
      new(**members.to_h { |m| [m, row[m.to_s]] })
    end
  end
end
