# frozen_string_literal: true

module Onceonly
  # The stale-claim policy and the cancel rule, as
  # crates/onceonly/src/protocol/policy.rs defines them;
  # test/protocol_test.rb checks them against protocol/transitions.json.
  module Protocol
    module_function

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
