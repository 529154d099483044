# frozen_string_literal: true

module Onceonly
  module Replay
    # The counts each policy allows, fixed before the run (docs/DESIGN.md
    # section 5; the same as `onceonly replay`).
    module Allowed
      Rule = Struct.new(:min, :max, :states, :counted, :why, keyword_init: true) do
        def to_h
          { "counted" => counted, "max" => max, "min" => min, "states" => states, "why" => why }
        end
      end

      STALE = {
        "local" => [1, 1, "completed", "local: claim, effect and completion commit in one transaction; " \
                                       "a crash rolls all back and the redelivery does it once"],
        "keyed" => [1, 1, "completed", "keyed: the redo sends the same idempotency key and the destination keeps one item"],
        "lookup" => [1, 1, "completed", "lookup: the redo looks the key up first; found, it completes with it; not found, it sends"],
        "opaque-hold" => [0, 0, "held", "hold: 0 extra effects; the stale claim is held for a person to resolve"],
        "opaque-at-least-once" => [1, 2, "completed", "at-least-once: the stale claim is redone once, so at most 1 extra effect"],
        "opaque-at-most-once" => [0, 0, "failed", "at-most-once: the stale claim is given up as failed, " \
                                                  "so at most 1 missing effect and never an extra one"]
      }.freeze

      module_function

      # The rule for `scenario` on effect kind `kind`; nil when it does not apply.
      def rule(scenario, kind)
        min, max, state, why = STALE.fetch(kind)
        case scenario
        when "repeat"
          effects(1, 1, "completed", "a repeat of a completed operation gets its stored result without acting")
        when "concurrent"
          effects(1, 1, "completed", "one claim wins the database's unique constraint; the other deliveries " \
                                     "see it in progress (retried later by Sidekiq) or done")
        when "crash_after_claim"
          effects(min, [max, 1].min, state, why)
        when "crash_after_effect"
          # The effect happened once before the crash: hold and at-most-once keep that one.
          kind.start_with?("opaque") && max.zero? ? effects(1, 1, state, why) : effects([min, 1].max, max, state, why)
        when "lease"
          effects(min, [max, 1].min, state, "a claim younger than its lease is left alone; past it, #{why}")
        when "similar_data"
          effects(2, 2, "completed", "two operation keys are two operations, however alike their data")
        when "cancel_while_sending"
          return nil if kind == "local"

          Rule.new(min: 0, max: 1, states: %w[cancelled completed], counted: "live",
                   why: "withdrawn at the destination (0 live, cancelled), or the withdraw failed and the " \
                        "completed record says so (1 live)")
        when "failure_after_success"
          effects(1, 1, "completed", "a failure write names a claim's token and state; on a completed record it changes 0 rows")
        when "other_payload"
          effects(1, 1, "completed", "the same key with another payload is another operation reusing the key: " \
                                     "refused (at push, by the recorded payload), not a repeat")
        end
      end

      def effects(min, max, state, why)
        Rule.new(min: min, max: max, states: [state], counted: "effects", why: why)
      end
    end
  end
end
