# frozen_string_literal: true

require "timeout"

module Onceonly
  # Guards one job type's effect: claim, act, then complete, release, fail or
  # hold, each write fenced by the claim's token. The same transitions as the
  # Rust guard (crates/onceonly/src/guard/), on the same tables:
  #
  #   guard = Onceonly::Guard.new(store, Onceonly::JobSpec.new(job_type: "send_receipt", effect: :keyed))
  #   guard.run("order-42", { "to" => "a@example.com" }) do |ctx|
  #     api.send(ctx.payload, idempotency_key: ctx.idempotency_key) # => result for repeats
  #   end
  #
  # An effect is a block (or an object with #perform(ctx), and optionally
  # #lookup(ctx) and #withdraw(ctx, external_ref)). It returns its result (or
  # an Onceonly::Done with the destination's reference), or raises
  # Onceonly::Effect::NotSent (surely not done), Effect::PermanentFailure, or
  # Effect::Unknown; any other StandardError counts as unknown (it may have
  # happened), the safe reading.
  class Guard
    # Internal: a heartbeat found the claim gone and stops the effect. Not a
    # StandardError, so an effect's `rescue => e` cannot swallow it.
    class ClaimGone < Exception; end # rubocop:disable Lint/InheritException
    # Internal: a heartbeat could not renew the lease before it runs out and
    # stops the effect (its outcome unknown), as the Rust guard drops it.
    class LeaseNotRenewed < Exception; end # rubocop:disable Lint/InheritException

    # A block as an effect with neither lookup nor withdraw.
    BlockEffect = Struct.new(:block) do
      def perform(ctx)
        block.call(ctx)
      end
    end

    Stale = Struct.new(:record)

    attr_reader :store, :spec, :owner, :max_retries
    # Called as hook.(point, ctx) at :after_claim and :after_effect (tests and
    # the replay harness); it may raise InjectedCrash or end the process.
    attr_accessor :fault_hook

    # Refuses a spec that breaks a timing rule (TimingError, naming the numbers).
    # `max_retries`: how often a not-sent (or, for keyed and lookup, unknown)
    # outcome is retried under the same claim before the claim is released.
    def initialize(store, spec, owner: Onceonly.new_owner, max_retries: 3, fault_hook: nil)
      raise InvalidInput, "store must be an Onceonly::Store, got #{store.class}" unless store.is_a?(Store)
      raise InvalidInput, "spec must be an Onceonly::JobSpec, got #{spec.class}" unless spec.is_a?(JobSpec)

      @store = store
      @spec = spec.validate!
      @owner = owner
      @max_retries = Integer(max_retries)
      raise InvalidInput, "max_retries #{@max_retries} must be 0 or more" if @max_retries.negative?
      @fault_hook = fault_hook
    end

    # Runs one delivery of operation `op_key`: claims it, performs the effect
    # if the claim is ours, and records the outcome under the claim's token.
    # Returns an Onceonly::Outcome. Raises PayloadMismatch when the key is
    # stored with another payload (nothing written), LostClaim when the claim
    # was taken from this worker before it could record.
    def run(op_key, payload = nil, effect = nil, &block)
      if spec.effect == :local
        raise InvalidInput, "a local effect runs in the caller's transaction: use run_local or claim_in"
      end

      effect ||= block && BlockEffect.new(block)
      raise InvalidInput, "run needs an effect: a block or an object with #perform(ctx)" unless effect.respond_to?(:perform)

      Keys.validate_op_key!(op_key)
      payload = Onceonly.payload(payload)
      kind, found = store.op_claim(job_type: spec.job_type, op_key: op_key, fingerprint: payload.fingerprint,
                                   payload: payload.json, owner: owner, lease_ms: spec.lease_ms)
      stale_before = false
      if kind == :claimed
        claim = found
      else
        decision = decide(found, payload)
        return decision unless decision.is_a?(Stale)

        claim = take_over(decision.record)
        return settled_after_race(op_key, payload) unless claim

        stale_before = true
      end
      act(ctx_for(op_key, claim, payload), claim, stale_before, effect)
    end

    # The context an effect gets under `claim`.
    def ctx_for(op_key, claim, payload)
      EffectCtx.new(job_type: spec.job_type, op_key: op_key, token: claim.token,
                    attempt: claim.attempts, payload: payload.value)
    end

    private

    # What an existing row means for a delivery carrying `payload`: an
    # Outcome, or Stale when a claim went past its lease.
    def decide(snap, payload)
      r = snap.record
      if r.fingerprint != payload.fingerprint
        raise PayloadMismatch.new(job_type: r.job_type, op_key: r.op_key,
                                  stored: r.fingerprint, offered: payload.fingerprint)
      end
      case r.state
      when "completed" then Outcome::Done.new(result: r.result_value, external_ref: r.external_ref, repeat: true)
      when "failed" then Outcome::Failed.new(error: r.error)
      when "cancelled" then Outcome::Cancelled.new(withdrawn_ref: nil)
      when "held" then Outcome::Held.new(reason: r.error)
      when "queued" then Outcome::NotDue.new(due_at: r.due_at)
      when "claimed"
        return Stale.new(r) if r.lease_expired?(snap.now)

        claimed_at = r.claimed_at || snap.now
        Outcome::InProgress.new(age_ms: [snap.now - claimed_at, 0].max,
                                lease_ms: [(r.lease_until || snap.now) - claimed_at, 0].max, owner: r.owner)
      end
    end

    # Takes over a stale claim as the policy says. The new Claim when this
    # worker now holds it and must act; nil when another worker moved the
    # row first, or the policy settled it (held or failed).
    def take_over(stale)
      by = stale.owner || "?"
      to = Protocol.take_over_to(Protocol.policy(spec.effect, spec.on_stale, stale.attempts))
      reason =
        if to == "claimed" then "took over a claim of #{by} past its lease"
        elsif to == "failed" then "claim went past its lease; given up under at-most-once (the effect may be missing)"
        elsif spec.on_stale == :at_least_once
          "a redo under at-least-once also went past its lease; held to keep to one extra"
        else "claim by #{by} went past its lease; the effect may or may not have happened"
        end
      taken = store.op_take_over(job_type: stale.job_type, op_key: stale.op_key, stale_token: stale.token,
                                 to: to, owner: owner, lease_ms: spec.lease_ms, reason: reason)
      Onceonly.logger.info("onceonly: stale claim #{stale.job_type}:#{stale.op_key} token #{stale.token} -> #{to} " \
                           "(#{taken ? 'won' : 'lost the race'})")
      if taken
        audit(stale.op_key, Protocol::TAKE_OVER, taken.token, "claimed", to, "stale token #{stale.token}: #{reason}")
      end
      to == "claimed" ? taken : nil
    end

    # After a lost take-over race or a settled take-over: the row as it stands.
    def settled_after_race(op_key, payload)
      snap = get(op_key)
      decision = decide(snap, payload)
      return decision unless decision.is_a?(Stale)

      # Still stale: someone else is taking it over right now.
      r = decision.record
      Outcome::InProgress.new(age_ms: [snap.now - (r.claimed_at || snap.now), 0].max,
                              lease_ms: spec.lease_ms, owner: r.owner)
    end

    # Appends an event (one of Protocol::AUDIT_EVENTS) under this guard's
    # owner, after the write that made it; a failed append is logged, never
    # turned into an error. `attempt` and `retry_after_ms`: a release's only.
    def audit(op_key, event, token, from, to, detail, attempt: nil, retry_after_ms: nil)
      store.op_audit(job_type: spec.job_type, op_key: op_key, event: event, actor: owner,
                     token: token, from: from, to: to, detail: detail,
                     attempt: attempt, retry_after_ms: retry_after_ms)
    rescue Error => e
      Onceonly.logger.warn("onceonly: audit append failed (#{spec.job_type}:#{op_key} #{event}): #{e.message}; " \
                           "the transition itself stands")
    end

    def get(op_key, conn: nil)
      store.op_get(spec.job_type, op_key, conn: conn) or
        raise NotFound, "#{spec.job_type}:#{op_key} is not in the database (purged?)"
    end

    def fault(point, ctx)
      fault_hook&.call(point, ctx)
    end

    # LostClaim for `token`, with the row as it now stands; appended to the trail.
    def lost(token, record)
      detail = "the row is now #{record.state} with token #{record.token} (owner #{record.owner || '-'})"
      audit(record.op_key, Protocol::LOST_CLAIM, token, "claimed", record.state, detail)
      LostClaim.new(token: token, record: record)
    end

    def lost_claim(op_key, token)
      lost(token, get(op_key).record)
    end
  end
end
