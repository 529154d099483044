# frozen_string_literal: true

module Onceonly
  # The stale-claim policy and the cancel rule, as
  # crates/onceonly/src/protocol/policy.rs defines them;
  # test/protocol_test.rb checks them against protocol/transitions.json.
  module Protocol
    # The owner's moves of its claim (the `move` statement): name => [from,
    # to, refused while a cancel is requested]. test/protocol_test.rb checks
    # them against the transitions of protocol/transitions.json.
    OWNER_MOVES = {
      "complete" => ["claimed", "completed", true],
      "release" => ["claimed", "queued", true],
      "fail" => ["claimed", "failed", false],
      "hold" => ["claimed", "held", false],
      "cancel_claimed" => ["claimed", "cancelled", false],
      "complete_withdraw_failed" => ["claimed", "completed", false]
    }.freeze

    # The audit events this client appends, as crates/onceonly/src/audit.rs
    # (AuditKind) names them: name => the transitions after which it does.
    # test/protocol_test.rb checks them against the audit_events of
    # protocol/transitions.json. (No relay here, so never `released`;
    # operator actions are the Rust CLI's and console's.)
    TAKE_OVER = "take_over"
    HOLD = "hold"
    LOST_CLAIM = "lost_claim"
    CANCELLED = "cancelled"
    COMPENSATED = "compensated"
    WITHDRAW_FAILED = "withdraw_failed"
    FAILED = "failed"
    RETRY = "retry"
    AUDIT_EVENTS = {
      TAKE_OVER => %w[take_over take_over_hold take_over_fail],
      HOLD => %w[hold],
      LOST_CLAIM => %w[heartbeat complete release fail hold cancel_claimed complete_withdraw_failed],
      CANCELLED => %w[cancel_claimed],
      COMPENSATED => %w[cancel_claimed],
      WITHDRAW_FAILED => %w[complete_withdraw_failed],
      FAILED => %w[fail],
      RETRY => %w[release]
    }.freeze

    module_function

    # The op_move arguments of the owner's move `name` of the claim with `token`.
    def owner_op(name, job_type:, op_key:, token:, **fields)
      from, to, unless_cancel_requested = OWNER_MOVES.fetch(name)
      { job_type: job_type, op_key: op_key, token: token, from: from, to: to,
        unless_cancel_requested: unless_cancel_requested, **fields }
    end

    # What a claim in doubt becomes after `attempts` claims: :redo, :hold or
    # :fail. Keyed, lookup and local effects redo safely; opaque ones follow
    # their policy, at-least-once redoing once and holding a second claim in doubt.
    def policy(effect, on_stale, attempts)
      return :redo unless effect == :opaque

      case on_stale
      when :hold then :hold
      when :at_most_once then :fail
      else attempts >= 2 ? :hold : :redo
      end
    end

    # The state a take-over moves the stale claim to.
    def take_over_to(settle)
      { redo: "claimed", hold: "held", fail: "failed" }.fetch(settle)
    end

    # Where the owner moves its claim for an unknown outcome ("queued": released).
    def owner_move(settle)
      { redo: "queued", hold: "held", fail: "failed" }.fetch(settle)
    end

    # The owner's move when a cancel was requested and its claim did not act:
    # "cancelled" when nothing of the operation can be live (the first claim,
    # or a lookup under this claim found nothing), else "held" for a person,
    # as an earlier claim may have acted and nobody can tell.
    def cancel_unsent(attempts, looked_up)
      attempts <= 1 || looked_up ? "cancelled" : "held"
    end
  end
end
