# frozen_string_literal: true

module Onceonly
  # The guard's decisions as a step machine without I/O, ported from the Rust
  # core's crates/onceonly/src/protocol/decide.rs: no store, no threads, no
  # clock. Steps and answers are plain data (Hashes with String keys, Strings,
  # Integers, true/false/nil) in exactly the JSON form of
  # protocol/decisions.json, which test/decisions_test.rb runs case by case.
  #
  #   decider = Decide::Decider.new(job, :run, payload.fingerprint)
  #   step = decider.next            # => {"do" => "claim"}
  #   step = decider.next(answer)    # ... until "finish" or "error"
  #
  # The guard (guard.rb, guard/act.rb, guard/local.rb) is the interpreter:
  # it runs each step's statement, effect, sleep or audit append and passes
  # what it got back to the next #next.
  module Decide
    # What the machine knows of a job: its spec, as the cases' "job" holds it.
    # `effect` and `on_stale` are Symbols (:keyed, :hold, ...).
    Job = Struct.new(:effect, :on_stale, :max_retries, :lease_ms, :timeout_ms, keyword_init: true)

    # The entries a case starts from.
    ENTRIES = %i[run run_claimed release_unstarted local].freeze

    # How a not-sent outcome from an unanswered lookup begins.
    LOOKUP_UNAVAILABLE = "lookup unavailable"
    # The first wait between tries under one claim (doubling after each).
    FIRST_SLEEP_MS = 20

    CLAIM = { "do" => "claim" }.freeze
    READ = { "do" => "read" }.freeze
    LOOKUP = { "do" => "lookup" }.freeze
    CANCEL_REQUESTED = { "do" => "cancel_requested" }.freeze
    FAULT_AFTER_CLAIM = { "do" => "fault", "point" => "after_claim" }.freeze
    FAULT_AFTER_EFFECT = { "do" => "fault", "point" => "after_effect" }.freeze
    NOT_FOUND = { "do" => "error", "error" => { "not_found" => {}.freeze }.freeze }.freeze
    # The first tries' perform steps, made once.
    PERFORM = Array.new(8) { |i| { "do" => "perform", "try" => i + 1 }.freeze }.freeze

    module_function

    # How long a released operation waits before it is due again: 500ms after
    # the first claim, doubling per claim, at most a minute.
    def retry_backoff_ms(attempt)
      doublings = (attempt - 1).clamp(0, 7)
      [500 * (2**doublings), 60_000].min
    end

    # A Snapshot as the machine reads a row ("ROW" in protocol/decisions.json).
    def row(snapshot)
      r = snapshot.record
      { "state" => r.state, "token" => r.token, "attempts" => r.attempts, "owner" => r.owner,
        "fingerprint" => r.fingerprint, "claimed_at_ms" => r.claimed_at, "lease_until_ms" => r.lease_until,
        "due_at_ms" => r.due_at, "external_ref" => r.external_ref, "result" => r.result, "error" => r.error,
        "cancel_requested" => r.cancel_requested, "now_ms" => snapshot.now }
    end

    # The Outcome a "finish" step's outcome names.
    def outcome(data)
      if (v = data["done"]) # the common end, without an [kind, value] pair
        return Outcome::Done.new(result: v["result"], external_ref: v["external_ref"], repeat: v["repeat"])
      end

      kind, v = data.first
      case kind
      when "in_progress" then Outcome::InProgress.new(age_ms: v["age_ms"], lease_ms: v["lease_ms"], owner: v["owner"])
      when "held" then Outcome::Held.new(reason: v["reason"])
      when "failed" then Outcome::Failed.new(error: v["error"])
      when "cancelled" then Outcome::Cancelled.new(withdrawn_ref: v["withdrawn_ref"])
      when "retry_later" then Outcome::RetryLater.new(reason: v["reason"], retry_after_ms: v["retry_after_ms"])
      when "not_due" then Outcome::NotDue.new(due_at: v["due_at_ms"])
      when "withdraw_failed" then Outcome::WithdrawFailed.new(external_ref: v["external_ref"], error: v["error"])
      else raise ArgumentError, "unknown outcome #{kind.inspect}"
      end
    end

    # One delivery's decisions. #next(answer) returns the next step; the
    # answer is what the interpreter got for the step before (nil for the
    # first, and for an audit append).
    class Decider
      # entry :run and :local need the delivery's `fingerprint`; :run_claimed
      # and :release_unstarted the claim taken elsewhere ({"token", "attempts"})
      # and, for :release_unstarted, the `reason` it is given back for.
      def initialize(job, entry, fingerprint = nil, claim: nil, reason: nil)
        raise ArgumentError, "unknown entry #{entry.inspect}" unless ENTRIES.include?(entry)

        @job = job
        @entry = entry
        @fingerprint = fingerprint
        @claim = claim
        @reason = reason
        @phase = :start
      end

      attr_reader :entry

      # True once the machine has given its end (a "finish" or "error" step).
      def ended?
        @phase == :ended
      end

      # The phase the machine waits in (the interpreter of a split local
      # claim checks it).
      attr_reader :phase

      def next(answer = nil)
        case @phase
        when :start then start
        when :claim then on_claim(answer)
        when :take_over then on_take_over(answer)
        when :take_over_audit then on_take_over_audit
        when :race_read then on_race_read(answer)
        when :after_claim then on_after_claim(answer)
        when :lookup then on_lookup(answer)
        when :cancel_check then on_cancel_check(answer)
        when :perform then on_perform(answer)
        when :sleep then on_sleep(answer)
        when :after_effect then on_after_effect(answer)
        when :failed_cancel then on_failed_cancel(answer)
        when :moved then on_moved(answer)
        when :audited then finish(@m_outcome)
        when :refused_read then on_refused_read(answer)
        when :withdraw then on_withdraw(answer)
        when :release_read then on_release_read(answer)
        when :lost_read then on_lost_read(answer)
        when :lost_audit then error("lost_claim" => { "token" => @token, "row" => @lost_row })
        when :local_claim then on_local_claim(answer)
        when :local_after_claim then on_local_after_claim(answer)
        when :local_perform then on_local_perform(answer)
        when :local_after_effect then on_local_after_effect(answer)
        when :local_complete then on_local_complete(answer)
        when :local_lost_read then on_local_lost_read(answer)
        else raise ArgumentError, "the machine has ended; no step follows"
        end
      end

      private

      attr_reader :job

      def start
        case @entry
        when :run
          @phase = :claim
          CLAIM
        when :local
          @phase = :local_claim
          CLAIM
        when :run_claimed
          take_claim(@claim, false)
          fault_after_claim
        when :release_unstarted
          take_claim(@claim, false)
          release(@reason, nil, :cancel_unsent, false)
        end
      end

      # -- the claim, and what an existing row means --------------------------

      def on_claim(answer)
        claimed = answer["claimed"]
        return existing(answer.fetch("existing")) unless claimed

        take_claim(claimed, false)
        fault_after_claim
      end

      def existing(row)
        return mismatch(row) if row["fingerprint"] != @fingerprint
        return settled(row) unless row["state"] == "claimed"
        return in_progress(row) unless lease_expired?(row)

        take_over(row)
      end

      def mismatch(row)
        error("payload_mismatch" => { "stored" => row["fingerprint"], "offered" => @fingerprint })
      end

      def lease_expired?(row)
        row["lease_until_ms"].nil? || row["lease_until_ms"] <= row["now_ms"]
      end

      # A settled row, as a repeat delivery reports it.
      def settled(row)
        case row["state"]
        when "completed"
          finish("done" => { "result" => stored_value(row["result"]), "external_ref" => row["external_ref"],
                             "repeat" => true })
        when "failed" then finish("failed" => { "error" => row["error"] })
        when "cancelled" then finish("cancelled" => { "withdrawn_ref" => nil })
        when "held" then finish("held" => { "reason" => row["error"] })
        when "queued" then finish("not_due" => { "due_at_ms" => row["due_at_ms"] })
        else raise ArgumentError, "unknown state #{row['state'].inspect}"
        end
      end

      # A live claim of another worker.
      def in_progress(row)
        now = row["now_ms"]
        claimed_at = row["claimed_at_ms"] || now
        finish("in_progress" => { "age_ms" => [now - claimed_at, 0].max,
                                  "lease_ms" => [(row["lease_until_ms"] || now) - claimed_at, 0].max,
                                  "owner" => row["owner"] })
      end

      # A claim past its lease, still stale when read again: someone else is
      # taking it over right now.
      def stale_in_progress(row)
        now = row["now_ms"]
        finish("in_progress" => { "age_ms" => [now - (row["claimed_at_ms"] || now), 0].max,
                                  "lease_ms" => job.lease_ms, "owner" => row["owner"] })
      end

      def stored_value(text)
        text && JSON.parse(text, max_nesting: false)
      rescue JSON::ParserError
        nil
      end

      # Takes over a stale claim as the policy says.
      def take_over(row)
        @settle = Protocol.policy(job.effect, job.on_stale, row["attempts"])
        @stale_token = row["token"]
        by = row["owner"] || "?"
        @take_over_reason =
          case @settle
          when :redo then "took over a claim of #{by} past its lease"
          when :fail then "claim went past its lease; given up under at-most-once (the effect may be missing)"
          else
            if job.effect == :opaque && job.on_stale == :at_least_once
              "a redo under at-least-once also went past its lease; held to keep to one extra"
            else
              "claim by #{by} went past its lease; the effect may or may not have happened"
            end
          end
        @phase = :take_over
        { "do" => "take_over", "settle" => @settle.to_s, "stale_token" => @stale_token, "reason" => @take_over_reason }
      end

      def on_take_over(answer)
        return race_read if answer.nil?

        @taken = answer
        @phase = :take_over_audit
        audit("take_over", @taken["token"], "claimed", Protocol.take_over_to(@settle),
              "stale token #{@stale_token}: #{@take_over_reason}")
      end

      def on_take_over_audit
        return race_read unless @settle == :redo

        take_claim(@taken, true)
        fault_after_claim
      end

      # After a lost take-over race or a settled take-over: the row as it stands.
      def race_read
        @phase = :race_read
        READ
      end

      def on_race_read(row)
        return error_not_found if row.nil?
        return mismatch(row) if row["fingerprint"] != @fingerprint
        return settled(row) unless row["state"] == "claimed"
        return in_progress(row) unless lease_expired?(row)

        stale_in_progress(row)
      end

      # -- acting under the claim ---------------------------------------------

      def take_claim(claim, after_stale)
        @token = claim["token"]
        @attempts = claim["attempts"]
        # A lookup effect looks first whenever an earlier claim may have acted.
        @look_first = job.effect == :lookup && (after_stale || @attempts > 1)
        @retries_left = job.max_retries
        @backoff_ms = FIRST_SLEEP_MS
        @try = 0
      end

      def fault_after_claim
        @phase = :after_claim
        FAULT_AFTER_CLAIM
      end

      def on_after_claim(answer)
        return crash("after_claim") if answer == "crash"

        try_effect
      end

      def try_effect
        return cancel_check unless @look_first

        @phase = :lookup
        LOOKUP
      end

      def cancel_check
        @phase = :cancel_check
        CANCEL_REQUESTED
      end

      def on_cancel_check(requested)
        if requested
          report(:failed, "cancel requested before the effect")
          return record
        end
        @try += 1
        @phase = :perform
        PERFORM[@try - 1] || { "do" => "perform", "try" => @try }
      end

      def on_lookup(answer)
        kind, value = split(answer)
        case kind
        when "found"
          done(value["external_ref"], value["result"], nil)
          record
        when "not_found" then cancel_check
        when "unavailable"
          report(:not_sent, "#{LOOKUP_UNAVAILABLE}: #{value}")
          record
        when "interrupted"
          report(:not_sent, "#{LOOKUP_UNAVAILABLE}: #{at_time_limit(value)}")
          record
        else stopped(kind, value)
        end
      end

      def on_perform(answer)
        return performed(answer["done"]) if answer.is_a?(Hash) && answer.key?("done")

        kind, value = split(answer)
        case kind
        when "not_sent" then tried(:not_sent, value)
        when "unknown", "raised" then tried(:unknown, value)
        when "failed"
          report(:failed, value)
          record
        else stopped(kind, value)
        end
      end

      def performed(value)
        done(value["external_ref"], value["result"], value["unstored"])
        @phase = :after_effect
        FAULT_AFTER_EFFECT
      end

      # An answer that ends the tries under the claim at once: the job
      # timeout, a lease not renewed, a lost claim, a stop from outside.
      def stopped(kind, value)
        case kind
        when "timed_out"
          report(:unknown, "timed out after #{Duration.format(job.timeout_ms)} (the job timeout: the whole " \
                           "attempt, every request in it); the effect was stopped")
        when "lease_unrenewed"
          report(:unknown, "the lease could not be renewed (#{value}); the effect was stopped before it ran out")
        when "interrupted" then report(:unknown, "the effect #{at_time_limit(value)}")
        when "claim_lost" then return lost_read
        else raise ArgumentError, "#{kind.inspect} does not answer #{@phase}"
        end
        record
      end

      def at_time_limit(why)
        "was stopped at the time limit (#{why})"
      end

      # A not-sent or unknown report: retried under the claim where the kind
      # allows it, after a sleep (20ms, doubling).
      def tried(kind, reason)
        report(kind, reason)
        retry_it = kind == :not_sent || %i[keyed lookup].include?(job.effect)
        return record if !retry_it || @retries_left.zero?

        @retries_left -= 1
        @look_first = job.effect == :lookup
        @phase = :sleep
        step = { "do" => "sleep", "ms" => @backoff_ms }
        @backoff_ms *= 2
        step
      end

      def on_sleep(answer)
        case answer
        when "slept" then try_effect
        # A job timeout during the sleep: nothing was sent meanwhile, so the
        # last report stands.
        when "timed_out" then record
        else stopped(*split(answer))
        end
      end

      def on_after_effect(answer)
        return crash("after_effect") if answer == "crash"

        record
      end

      def report(kind, reason)
        @kind = kind
        @why = reason
      end

      # A done report. One whose reference or result breaks the answer rules
      # (Onceonly::Answer) broke the protocol: failed for good, nothing of it
      # stored. `unstored`: why the interpreter could not store the result
      # (it is then null), written as the completion's error.
      def done(external_ref, result, unstored)
        @unstored = unstored
        text = storable(result)
        result = nil if @unstored
        broken = Answer.broken(external_ref, text)
        return report(:failed, broken) if broken

        @kind = :done
        @external_ref = external_ref
        @result = result
        @result_text = text
      end

      # The result's JSON text. A Ruby value with no JSON form (NaN, invalid
      # UTF-8) is read as the done answer's `unstored`: stored as null, the
      # error saying why (the same steps as when the interpreter says so).
      def storable(result)
        JSON.generate(result)
      rescue JSON::GeneratorError => e
        @unstored = "the effect's result was not stored: #{e.message}"
        "null"
      end

      # -- recording what the effect reported ---------------------------------

      def record
        case @kind
        when :done
          moving("complete", @external_ref, @result_text, @unstored, nil, nil,
                 { "done" => { "result" => @result, "external_ref" => @external_ref, "repeat" => false } },
                 :refused_read)
        when :not_sent then release(@why, Decide.retry_backoff_ms(@attempts), :cancel_unsent, looked_up?(@why))
        when :failed
          @phase = :failed_cancel
          CANCEL_REQUESTED
        when :unknown then unknown
        end
      end

      def on_failed_cancel(requested)
        return cancel_unsent(@why, looked_up?(@why)) if requested

        fenced("fail", @why, "failed" => { "error" => @why })
      end

      # Whether a lookup under this claim found nothing before `reason` (a
      # lookup effect looks first on every claim after the first).
      def looked_up?(reason)
        job.effect == :lookup && @attempts > 1 && !reason.start_with?(LOOKUP_UNAVAILABLE)
      end

      # An unknown outcome that retries under the claim did not clear: the
      # policy decides, as for a claim past its lease.
      def unknown
        case Protocol.owner_move(Protocol.policy(job.effect, job.on_stale, @attempts))
        when "held" then fenced("hold", @why, "held" => { "reason" => @why })
        when "failed" then fenced("fail", @why, "failed" => { "error" => @why })
        else release(@why, Decide.retry_backoff_ms(@attempts), :hold_unknown, false)
        end
      end

      # Releases the claim to queued, due after `backoff_ms` (nil: a claim
      # given back unstarted, due at once). Refused while a cancel is
      # requested: then `refused` (:cancel_unsent or :hold_unknown) decides.
      def release(reason, backoff_ms, refused, looked_up)
        @release_reason = reason
        @release_refused = refused
        @looked_up = looked_up
        @m_event = backoff_ms ? "retry" : "released"
        @m_detail = reason
        @m_to = "queued"
        @m_attempt = @attempts
        @m_retry_after = backoff_ms || 0
        @m_outcome = { "retry_later" => { "reason" => reason, "retry_after_ms" => backoff_ms || 0 } }
        @m_refused = :release_read
        @phase = :moved
        move_step("release", nil, nil, reason, backoff_ms)
      end

      def on_release_read(row)
        return error_not_found if row.nil?
        return lost(row) unless ours_cancel_requested?(row)

        reason = @release_reason
        if @release_refused == :cancel_unsent
          return cancel_unsent("cancel requested; the effect was not sent (#{reason})", @looked_up)
        end

        # An operator asked to cancel, but the effect may exist and there is
        # no reference to withdraw: a person must look, the request kept.
        note = "cancel requested, but the effect's outcome is unknown (#{reason}); check the destination"
        fenced("hold", note, "held" => { "reason" => note })
      end

      # A cancel was requested and this claim did not act: cancelled, or held
      # for a person when an earlier claim may have acted.
      def cancel_unsent(note, looked_up)
        if Protocol.cancel_unsent(@attempts, looked_up) == "cancelled"
          return fenced("cancel_claimed", note, "cancelled" => { "withdrawn_ref" => nil })
        end

        note = "#{note}; an earlier claim of this operation may have acted: check the destination"
        fenced("hold", note, "held" => { "reason" => note })
      end

      # The owner's move `name` with `reason` as its error, then its event.
      def fenced(name, reason, outcome)
        moving(name, nil, nil, reason, nil, EVENTS.fetch(name), outcome, :lost_read)
      end

      EVENTS = { "fail" => "failed", "hold" => "hold", "cancel_claimed" => "cancelled" }.freeze
      private_constant :EVENTS

      # The move `name`, then (when it moved) the audit `event` and `outcome`;
      # when refused, the read `refused` names.
      def moving(name, external_ref, result, error, retry_after_ms, event, outcome, refused)
        @m_event = event
        @m_detail = error
        @m_to = Protocol::OWNER_MOVES.fetch(name)[1]
        @m_attempt = nil
        @m_retry_after = nil
        @m_outcome = outcome
        @m_refused = refused
        @phase = :moved
        move_step(name, external_ref, result, error, retry_after_ms)
      end

      def move_step(name, external_ref, result, error, retry_after_ms)
        { "do" => "move", "move" => name, "token" => @token, "external_ref" => external_ref, "result" => result,
          "error" => error, "retry_after_ms" => retry_after_ms }
      end

      def on_moved(moved)
        if moved
          return finish(@m_outcome) unless @m_event

          @phase = :audited
          return audit(@m_event, @token, "claimed", @m_to, @m_detail, attempt: @m_attempt,
                                                                      retry_after_ms: @m_retry_after)
        end
        case @m_refused
        when :release_read, :refused_read
          @phase = @m_refused
          READ
        else lost_read
        end
      end

      # The completion changed nothing: an operator asked to cancel while the
      # effect ran (withdraw it), or the claim is gone.
      def on_refused_read(row)
        return error_not_found if row.nil?
        return lost(row) unless ours_cancel_requested?(row)
        return withdrawn(false, "the effect returned no reference to withdraw") if @external_ref.nil?

        @phase = :withdraw
        { "do" => "withdraw", "external_ref" => @external_ref }
      end

      def on_withdraw(answer)
        return withdrawn(true, nil) if answer == "withdrawn"

        withdrawn(false, answer.fetch("not_withdrawn"))
      end

      def withdrawn(yes, why)
        if yes
          note = "cancel requested while the effect ran; withdrawn at the destination"
          return moving("cancel_claimed", @external_ref, @result_text, note, nil, "compensated",
                        { "cancelled" => { "withdrawn_ref" => @external_ref } }, :lost_read)
        end

        note = "cancel requested while the effect ran, but the withdraw failed (#{why}); " \
               "the item is live at the destination"
        moving("complete_withdraw_failed", @external_ref, @result_text, note, nil, "withdraw_failed",
               { "withdraw_failed" => { "external_ref" => @external_ref, "error" => why } }, :lost_read)
      end

      def ours_cancel_requested?(row)
        row["state"] == "claimed" && row["token"] == @token && row["cancel_requested"]
      end

      # The claim is gone: read the row, append lost_claim, end in lost_claim.
      def lost_read
        @phase = :lost_read
        READ
      end

      def on_lost_read(row)
        return error_not_found if row.nil?

        lost(row)
      end

      def lost(row)
        @lost_row = row
        @phase = :lost_audit
        audit("lost_claim", @token, "claimed", row["state"],
              "the row is now #{row['state']} with token #{row['token']} (owner #{row['owner'] || '-'})")
      end

      # -- local effects: inside the caller's transaction ---------------------

      def on_local_claim(answer)
        claimed = answer["claimed"]
        unless claimed
          row = answer.fetch("existing")
          return mismatch(row) if row["fingerprint"] != @fingerprint
          return settled(row) unless row["state"] == "claimed"
          return in_progress(row) unless lease_expired?(row)

          # A local claim only outlives its transaction if someone mixed
          # effect kinds on one job type; a person must look.
          return stale_in_progress(row)
        end
        @token = claimed["token"]
        @attempts = claimed["attempts"]
        @phase = :local_after_claim
        FAULT_AFTER_CLAIM
      end

      def on_local_after_claim(answer)
        return crash("after_claim") if answer == "crash"

        @phase = :local_perform
        PERFORM[0]
      end

      def on_local_perform(answer)
        kind, value = split(answer)
        case kind
        when "done"
          @result = value["result"]
          @phase = :local_after_effect
          FAULT_AFTER_EFFECT
        when "timed_out" then error("timeout" => { "timeout_ms" => job.timeout_ms })
        when "claim_lost" then error("local_effect_failed" => { "why" => "the claim was lost" })
        when "raised", "not_sent", "unknown", "failed", "interrupted", "lease_unrenewed"
          error("local_effect_failed" => { "why" => value })
        else raise ArgumentError, "#{kind.inspect} does not answer a local effect"
        end
      end

      def on_local_after_effect(answer)
        return crash("after_effect") if answer == "crash"

        # Ruby only (a value with no JSON form): the transaction rolls back.
        @unstored = nil
        text = storable(@result)
        return error("local_effect_failed" => { "why" => @unstored }) if @unstored

        @phase = :local_complete
        move_step("complete", nil, text, nil, nil)
      end

      def on_local_complete(moved)
        return finish("done" => { "result" => @result, "external_ref" => nil, "repeat" => false }) if moved

        # Refused: the transaction rolls back, so no audit append.
        @phase = :local_lost_read
        READ
      end

      def on_local_lost_read(row)
        return error_not_found if row.nil?

        error("lost_claim" => { "token" => @token, "row" => row })
      end

      # -- steps --------------------------------------------------------------

      def audit(event, token, from, to, detail, attempt: nil, retry_after_ms: nil)
        { "do" => "audit", "event" => event, "token" => token, "from" => from, "to" => to, "detail" => detail,
          "attempt" => attempt, "retry_after_ms" => retry_after_ms }
      end

      def crash(point)
        error("injected_crash" => { "point" => point })
      end

      def finish(outcome)
        @phase = :ended
        { "do" => "finish", "outcome" => outcome }
      end

      def error(error)
        @phase = :ended
        { "do" => "error", "error" => error }
      end

      def error_not_found
        @phase = :ended
        NOT_FOUND
      end

      # An answer as [kind, value]: {"kind" => value} or "kind".
      def split(answer)
        answer.is_a?(Hash) ? answer.first : [answer, nil]
      end
    end
  end
end
