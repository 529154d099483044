# frozen_string_literal: true

module Onceonly
  # Every error onceonly raises is an Onceonly::Error.
  class Error < StandardError; end

  # Bad input (a job type, key, payload, setting or URL); nothing was written.
  class InvalidInput < Error; end

  # A job's settings break a timing rule of docs/DESIGN.md section 4.
  class TimingError < InvalidInput; end

  # The key is stored with another payload: another operation reusing the
  # key, not a repeat.
  class PayloadMismatch < Error
    attr_reader :job_type, :op_key, :stored, :offered

    def initialize(job_type:, op_key:, stored:, offered:)
      @job_type, @op_key, @stored, @offered = job_type, op_key, stored, offered
      super("operation #{job_type}:#{op_key} exists with another payload " \
            "(stored fingerprint #{stored}, this one #{offered})")
    end
  end

  # The claim was taken from this worker (take-over, cancel) before it could
  # record; nothing was overwritten. `record` is the row as it now stands.
  class LostClaim < Error
    attr_reader :token, :record

    def initialize(token:, record:)
      @token, @record = token, record
      super("lost the claim with token #{token}: the row is now #{record.state} " \
            "with token #{record.token} (owner #{record.owner || '-'})")
    end
  end

  # The record disappeared (purged) while it was being worked on.
  class NotFound < Error; end

  # The database could not be reached or refused a statement.
  class DatabaseError < Error; end

  # The tables do not exist yet (no migrate was run on this database): a
  # DatabaseError whose message names the command that creates them.
  class NotMigrated < DatabaseError
    # `where`: the database, printable (password redacted).
    def self.for(where, cause)
      new("the onceonly tables do not exist in #{where} (#{cause}): create them before the first push " \
          "with `onceonly --db URL migrate` or `Onceonly.migrate(url)`")
    end
  end

  # Raised at a fault point by a fault hook (tests and the replay harness).
  class InjectedCrash < Error
    attr_reader :point

    def initialize(point)
      @point = point
      super("injected crash at #{point}")
    end
  end

  # What an effect raises to say how it went, when it did not simply return.
  module Effect
    # It surely did not happen (nothing reached the destination): safe to retry.
    class NotSent < Onceonly::Error; end

    # It may have happened: treated like a crash after the effect. Any other
    # StandardError from an effect is treated the same way.
    class Unknown < Onceonly::Error; end

    # It failed for good; retrying will not help.
    class PermanentFailure < Onceonly::Error; end
  end
end
