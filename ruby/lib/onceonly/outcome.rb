# frozen_string_literal: true

module Onceonly
  # What an effect returns when it has a reference at the destination:
  # `Onceonly::Done.new(external_ref: "ch_123", result: {...})`. Any other
  # return value is the result, with no reference.
  Done = Struct.new(:external_ref, :result, keyword_init: true)

  # What became of one delivery of an operation (crates/onceonly/src/guard/mod.rs Outcome).
  module Outcome
    # Completed, by this delivery or (repeat) an earlier one whose stored result this is.
    Done = Struct.new(:result, :external_ref, :repeat, keyword_init: true)
    # Another worker holds a live claim: leave it for a later delivery.
    InProgress = Struct.new(:age_ms, :lease_ms, :owner, keyword_init: true)
    # Nobody can tell whether the effect happened; a person must resolve it.
    Held = Struct.new(:reason, keyword_init: true)
    # Failed for good (or the policy gave it up).
    Failed = Struct.new(:error, keyword_init: true)
    # Cancelled; `withdrawn_ref` names an item withdrawn after the effect.
    Cancelled = Struct.new(:withdrawn_ref, keyword_init: true)
    # Not done this time, safe to deliver again (the claim was released);
    # due again after `retry_after_ms` (the backoff; 0 for a claim given back unstarted).
    RetryLater = Struct.new(:reason, :retry_after_ms, keyword_init: true)
    # Queued for later; its due time (ms, database clock) has not come.
    NotDue = Struct.new(:due_at, keyword_init: true)
    # A cancel came while the effect ran and the withdraw failed: still completed.
    WithdrawFailed = Struct.new(:external_ref, :error, keyword_init: true)

    # A short description for logs: "done", "done (a repeat: stored result)", "held: why".
    def self.describe(outcome)
      case outcome
      when Done then outcome.repeat ? "done (a repeat: stored result)" : "done"
      when InProgress then "in progress elsewhere (claim #{outcome.age_ms}ms old, lease #{outcome.lease_ms}ms, #{outcome.owner})"
      when Held then "held: #{outcome.reason}"
      when Failed then "failed: #{outcome.error}"
      when Cancelled then outcome.withdrawn_ref ? "cancelled (withdrawn #{outcome.withdrawn_ref})" : "cancelled"
      when RetryLater then "retry later: #{outcome.reason}"
      when NotDue then "not due until #{outcome.due_at}"
      when WithdrawFailed then "withdraw failed: #{outcome.error}"
      else outcome.inspect
      end
    end
  end

  # What an effect knows about the operation it acts for.
  class EffectCtx
    attr_reader :job_type, :op_key, :idempotency_key, :token, :attempt, :payload

    def initialize(job_type:, op_key:, token:, attempt:, payload:)
      @job_type, @op_key, @token, @attempt, @payload = job_type, op_key, token, attempt, payload
      @idempotency_key = Keys.idempotency_key(job_type, op_key)
      @cancel_requested = false
    end

    # True once a heartbeat has carried an operator's cancel request. A long
    # effect should stop before acting.
    def cancel_requested?
      @cancel_requested
    end

    # Set by the guard's heartbeat.
    attr_writer :cancel_requested
  end
end
