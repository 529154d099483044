# frozen_string_literal: true

require "timeout"

module Onceonly
  # Guards one job type's effect: claim, act, then complete, release, fail or
  # hold, each write fenced by the claim's token. What to do next is decided
  # by Onceonly::Decide (the Rust core's decisions, checked case by case
  # against protocol/decisions.json); the guard runs its steps: the
  # statements, the effect within its deadline, the heartbeat, the sleeps,
  # the audit appends and the fault hook. On the same tables as the Rust guard:
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

    # One delivery under way: what the steps of its decider act on.
    Delivery = Struct.new(:op_key, :payload, :effect, :ctx, :claim, :snapshot, :deadline_at, :heartbeat)

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

      unless owner.is_a?(String) && !owner.empty?
        raise InvalidInput, "owner must be a non-empty String (who holds the claims), got #{owner.inspect}"
      end

      @store = store
      @spec = spec.validate!
      @owner = owner
      @max_retries = Integer(max_retries)
      raise InvalidInput, "max_retries #{@max_retries} must be 0 or more" if @max_retries.negative?
      @fault_hook = fault_hook
      @job = Decide::Job.new(effect: spec.effect, on_stale: spec.on_stale, max_retries: @max_retries,
                             lease_ms: spec.lease_ms, timeout_ms: spec.timeout_ms).freeze
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
      decider = Decide::Decider.new(@job, :run, payload.fingerprint)
      drive(decider, Delivery.new(op_key, payload, effect))
    end

    # The context an effect gets under `claim`.
    def ctx_for(op_key, claim, payload)
      EffectCtx.new(job_type: spec.job_type, op_key: op_key, token: claim.token,
                    attempt: claim.attempts, payload: payload.value)
    end

    private

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

    # The row as the decider reads it (protocol/decisions.json's ROW), or nil.
    def read(delivery, conn: nil)
      snap = store.op_get(spec.job_type, delivery.op_key, conn: conn)
      delivery.snapshot = snap
      snap && Decide.row(snap)
    end
  end
end
