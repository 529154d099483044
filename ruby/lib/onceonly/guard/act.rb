# frozen_string_literal: true

module Onceonly
  # Acting under a claim: the effect within the timeout and heartbeat, then
  # the fenced write of its outcome (or the withdraw, when a cancel came in).
  class Guard
    # How a not-sent outcome from an unanswered lookup begins.
    LOOKUP_UNAVAILABLE = "lookup unavailable"

    private

    def act(ctx, claim, after_stale, effect)
      outcome = perform(ctx, claim, after_stale, effect)
      record(ctx, outcome, effect)
    end

    # The effect under the claim, bounded by the job timeout: a timed-out
    # effect is stopped (Deadline raises in it) and its outcome is unknown.
    # Returns [:done, external_ref, result], [:not_sent, why], [:unknown, why]
    # or [:failed, why].
    def perform(ctx, claim, after_stale, effect)
      fault(:after_claim, ctx)
      Deadline.within(spec.timeout_ms / 1000.0) do
        with_heartbeat(ctx) { attempts(ctx, claim, after_stale, effect) }
      end
    rescue Timeout::Error
      [:unknown, "timed out after #{Duration.format(spec.timeout_ms)}; the effect was stopped"]
    end

    # Runs the block while renewing the lease every heartbeat interval; stops
    # the block (raises in it) when the claim turns out lost, or when the
    # lease can no longer be renewed before it runs out (its outcome unknown).
    def with_heartbeat(ctx)
      return yield unless spec.heartbeat_ms

      worker = Thread.current
      lock = Mutex.new
      wake = ConditionVariable.new
      done = false
      lost_error = nil
      unrenewed = nil
      interval = spec.heartbeat_ms / 1000.0
      beat = Thread.new do
        # The claim was taken about now; the block must not go on past a
        # lease that could not be renewed.
        renewed = monotonic
        loop do
          lock.synchronize { wake.wait(lock, interval) unless done }
          break if lock.synchronize { done }

          begin
            hb = store.op_heartbeat(job_type: ctx.job_type, op_key: ctx.op_key, token: ctx.token,
                                    lease_ms: spec.lease_ms)
          rescue Error => e
            if monotonic - renewed + interval >= spec.lease_ms / 1000.0
              Onceonly.logger.warn("onceonly: lease of #{ctx.job_type}:#{ctx.op_key} not renewed (#{e.message}); " \
                                   "stopping the effect")
              unrenewed = "the lease could not be renewed (#{e.message}); the effect was stopped before it ran out"
              lock.synchronize { worker.raise(LeaseNotRenewed) unless done }
              break
            end
            Onceonly.logger.warn("onceonly: heartbeat of #{ctx.job_type}:#{ctx.op_key} failed (#{e.message}); will retry")
            next
          end
          if hb
            renewed = monotonic
            ctx.cancel_requested = hb[:cancel_requested]
            next
          end
          lost_error = lost_claim(ctx.op_key, ctx.token)
          lock.synchronize { worker.raise(ClaimGone) unless done }
          break
        end
      end
      begin
        yield
      ensure
        lock.synchronize do
          done = true
          wake.signal
        end
        beat.join
      end
    rescue ClaimGone
      raise lost_error
    rescue LeaseNotRenewed
      [:unknown, unrenewed]
    end

    def monotonic
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    # The effect, retried under the claim where the kind allows it.
    def attempts(ctx, claim, after_stale, effect)
      # A lookup effect looks first whenever an earlier claim may have acted.
      look_first = spec.effect == :lookup && (after_stale || claim.attempts > 1)
      retries_left = max_retries
      backoff = 0.02
      loop do
        if look_first
          found = lookup(ctx, effect)
          return found if found
        end
        return [:failed, "cancel requested before the effect"] if ctx.cancel_requested?

        outcome = call_effect(ctx, effect)
        retry_it = outcome[0] == :not_sent || (outcome[0] == :unknown && %i[keyed lookup].include?(spec.effect))
        if !retry_it || retries_left.zero?
          fault(:after_effect, ctx) if outcome[0] == :done
          return outcome
        end
        Onceonly.logger.debug("onceonly: retrying #{ctx.job_type}:#{ctx.op_key} under the claim: #{outcome.inspect}")
        retries_left -= 1
        look_first = spec.effect == :lookup
        sleep(backoff)
        backoff *= 2
      end
    end

    # [:done, ...] when the destination has it, nil when surely not,
    # [:not_sent, ...] when the lookup could not answer.
    def lookup(ctx, effect)
      unless effect.respond_to?(:lookup)
        return [:not_sent, "#{LOOKUP_UNAVAILABLE}: a lookup effect needs #lookup(ctx)"]
      end

      found = effect.lookup(ctx)
      return nil if found.nil? || found == false

      found.is_a?(Onceonly::Done) ? [:done, found.external_ref, found.result] : [:done, nil, found]
    rescue StandardError => e
      [:not_sent, "#{LOOKUP_UNAVAILABLE}: #{e.class}: #{e.message}"]
    end

    def call_effect(ctx, effect)
      value = effect.perform(ctx)
      value.is_a?(Onceonly::Done) ? [:done, value.external_ref, value.result] : [:done, nil, value]
    rescue Effect::NotSent => e
      [:not_sent, e.message]
    rescue Effect::PermanentFailure => e
      [:failed, e.message]
    rescue Effect::Unknown => e
      [:unknown, e.message]
    rescue InjectedCrash, LostClaim
      raise
    rescue StandardError => e
      [:unknown, "#{e.class}: #{e.message}"]
    end

    # Writes what the effect reported, under the claim's token.
    def record(ctx, outcome, effect)
      case outcome
      in [:done, external_ref, result]
        result_text, unstored = storable(result)
        # An answer that breaks the answer rules broke the protocol, as a 2xx
        # without an id does: failed for good, nothing of it stored.
        broken = Answer.broken(external_ref, result_text)
        return record(ctx, [:failed, broken], effect) if broken
        Onceonly.logger.warn("onceonly: #{ctx.job_type}:#{ctx.op_key}: #{unstored}") if unstored
        if move(ctx, "complete", external_ref: external_ref, result: result_text, error: unstored)
          return Outcome::Done.new(result: unstored ? nil : result, external_ref: external_ref, repeat: false)
        end

        completion_refused(ctx, external_ref, result_text, effect)
      in [:not_sent, reason]
        return Outcome::RetryLater.new(reason: reason) if release(ctx, reason)

        # An operator asked to cancel, and nothing was sent: stop here.
        cancel_unsent(ctx, "cancel requested; the effect was not sent (#{reason})", looked_up?(ctx, reason))
      in [:failed, error] if ctx.cancel_requested?
        cancel_unsent(ctx, error, looked_up?(ctx, error))
      in [:failed, error]
        fenced(ctx, "failed", error)
        Outcome::Failed.new(error: error)
      in [:unknown, reason]
        unknown(ctx, reason)
      end
    end

    # Whether a lookup under this claim found nothing before `reason` (a
    # lookup effect looks first on every claim after the first).
    def looked_up?(ctx, reason)
      spec.effect == :lookup && ctx.attempt > 1 && !reason.start_with?(LOOKUP_UNAVAILABLE)
    end

    # A cancel was requested and this claim did not act: cancelled, or held
    # (the request kept) when an earlier claim may have acted.
    def cancel_unsent(ctx, note, looked_up)
      if Protocol.cancel_unsent(ctx.attempt, looked_up) == "cancelled"
        fenced(ctx, "cancelled", note)
        return Outcome::Cancelled.new(withdrawn_ref: nil)
      end

      note = "#{note}; an earlier claim of this operation may have acted: check the destination"
      fenced(ctx, "held", note)
      Outcome::Held.new(reason: note)
    end

    # [JSON, nil], or [nil, why] for a result that is not JSON: the effect
    # happened all the same, and its completion must be recorded.
    def storable(result)
      [JSON.generate(result), nil]
    rescue JSON::GeneratorError => e
      [nil, "the effect's result was not stored: #{e.message}"]
    end

    # An unknown outcome that retries under the claim did not clear.
    def unknown(ctx, reason)
      to = Protocol.owner_move(Protocol.policy(spec.effect, spec.on_stale, ctx.attempt))
      if to != "queued"
        fenced(ctx, to, reason)
        return to == "failed" ? Outcome::Failed.new(error: reason) : Outcome::Held.new(reason: reason)
      end
      return Outcome::RetryLater.new(reason: reason) if release(ctx, reason)

      # An operator asked to cancel, but the effect may exist and there is no
      # reference to withdraw: a person must look, the request kept.
      note = "cancel requested, but the effect's outcome is unknown (#{reason}); check the destination"
      fenced(ctx, "held", note)
      Outcome::Held.new(reason: note)
    end

    # Releases our claim to queued unless an operator asked to cancel it.
    # true: released. false: a cancel is pending and the claim is still ours.
    # Raises LostClaim when the claim is gone.
    def release(ctx, reason)
      backoff_ms = self.class.retry_backoff_ms(ctx.attempt)
      if move(ctx, "release", error: reason, retry_after_ms: backoff_ms)
        audit(ctx.op_key, Protocol::RETRY, ctx.token, "claimed", "queued", reason,
              attempt: ctx.attempt, retry_after_ms: backoff_ms)
        return true
      end

      r = get(ctx.op_key).record
      return false if r.state == "claimed" && r.token == ctx.token && r.cancel_requested

      raise lost(ctx.token, r)
    end

    # Moves our claim to `to` and appends the event, or raises LostClaim.
    def fenced(ctx, to, reason)
      name = { "held" => "hold", "cancelled" => "cancel_claimed", "failed" => "fail" }.fetch(to)
      raise lost_claim(ctx.op_key, ctx.token) unless move(ctx, name, error: reason)

      event = { "held" => Protocol::HOLD, "cancelled" => Protocol::CANCELLED }.fetch(to, Protocol::FAILED)
      audit(ctx.op_key, event, ctx.token, "claimed", to, reason)
    end

    # The owner's move `name` (Protocol::OWNER_MOVES) of this claim.
    def move(ctx, name, **fields)
      store.op_move(**Protocol.owner_op(name, job_type: ctx.job_type, op_key: ctx.op_key, token: ctx.token, **fields))
    end

    # The completion changed nothing: either an operator asked to cancel
    # while the effect ran (withdraw it), or the claim is gone.
    def completion_refused(ctx, external_ref, result_text, effect)
      r = get(ctx.op_key).record
      raise lost(ctx.token, r) unless r.state == "claimed" && r.token == ctx.token && r.cancel_requested

      withdraw_error = withdraw(ctx, external_ref, effect)
      if withdraw_error.nil?
        to = "cancelled"
        note = "cancel requested while the effect ran; withdrawn at the destination"
        event = Protocol::COMPENSATED
        outcome = Outcome::Cancelled.new(withdrawn_ref: external_ref)
      else
        to = "completed"
        note = "cancel requested while the effect ran, but the withdraw failed (#{withdraw_error}); " \
               "the item is live at the destination"
        event = Protocol::WITHDRAW_FAILED
        outcome = Outcome::WithdrawFailed.new(external_ref: external_ref, error: withdraw_error)
      end
      Onceonly.logger.warn("onceonly: compensation of #{ctx.job_type}:#{ctx.op_key}: #{note}")
      name = to == "cancelled" ? "cancel_claimed" : "complete_withdraw_failed"
      raise lost_claim(ctx.op_key, ctx.token) unless move(ctx, name, external_ref: external_ref, result: result_text,
                                                                     error: note)

      audit(ctx.op_key, event, ctx.token, "claimed", to, note)
      outcome
    end

    # nil when withdrawn, else why not.
    def withdraw(ctx, external_ref, effect)
      return "the effect returned no reference to withdraw" if external_ref.nil?
      return "this effect cannot be withdrawn" unless effect.respond_to?(:withdraw)

      effect.withdraw(ctx, external_ref) ? nil : "the destination did not confirm the withdraw"
    rescue StandardError => e
      "#{e.class}: #{e.message}"
    end

    public

    # How long a released operation waits before it is due again: 500ms after
    # the first claim, doubling per claim, at most a minute (as the Rust guard).
    def self.retry_backoff_ms(attempt)
      doublings = (attempt - 1).clamp(0, 7)
      [500 * (2**doublings), 60_000].min
    end
  end
end
