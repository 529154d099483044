# frozen_string_literal: true

module Onceonly
  # A local effect's body raised; its transaction (claim included) rolled back.
  class LocalEffectFailed < Error; end

  # Local effects: claim and completion inside the caller's transaction, on
  # the caller's own connection (a PG::Connection or a SQLite3::Database on
  # the store's database), so the effect exists exactly once.
  class Guard
    # A claim taken inside the caller's transaction.
    LocalClaim = Struct.new(:claim, :op_key, :ctx)

    # Claims a local operation inside the caller's open transaction on `conn`.
    # Returns [:claimed, LocalClaim] (do the effect, then complete_in, then
    # commit) or [:settled, outcome] (nothing to do).
    def claim_in(conn, op_key, payload = nil)
      Keys.validate_op_key!(op_key)
      payload = Onceonly.payload(payload)
      kind, found = store.op_claim(job_type: spec.job_type, op_key: op_key, fingerprint: payload.fingerprint,
                                   payload: payload.json, owner: owner, lease_ms: spec.lease_ms, conn: conn)
      return [:claimed, LocalClaim.new(found, op_key, ctx_for(op_key, found, payload))] if kind == :claimed

      decision = decide(found, payload)
      return [:settled, decision] unless decision.is_a?(Stale)

      # A local claim only outlives its transaction if someone mixed effect
      # kinds on one job type; a person must look.
      r = decision.record
      [:settled, Outcome::InProgress.new(age_ms: [found.now - (r.claimed_at || found.now), 0].max,
                                         lease_ms: spec.lease_ms, owner: r.owner)]
    end

    # Completes a local claim inside the caller's transaction; raises
    # LostClaim (roll back) when the claim is no longer ours.
    def complete_in(conn, local_claim, result)
      fault(:after_effect, local_claim.ctx)
      moved = store.op_move(**Protocol.owner_op("complete", job_type: spec.job_type, op_key: local_claim.op_key,
                                                            token: local_claim.claim.token,
                                                            result: JSON.generate(result), conn: conn))
      unless moved
        snap = store.op_get(spec.job_type, local_claim.op_key, conn: conn)
        raise NotFound, "#{spec.job_type}:#{local_claim.op_key} is gone" unless snap

        raise LostClaim.new(token: local_claim.claim.token, record: snap.record)
      end
      Outcome::Done.new(result: result, external_ref: nil, repeat: false)
    end

    # Runs a local effect: claim, the block and completion in one transaction
    # on `conn` (default: a connection of the store's pool). The block gets
    # the connection and the EffectCtx and does its own writes on that
    # connection; what it returns is the stored result. If it raises,
    # everything rolls back, nothing is recorded, and LocalEffectFailed is raised.
    def run_local(op_key, payload = nil, conn: nil, &effect)
      raise InvalidInput, "run_local needs a block: the effect, given the connection and the context" unless effect
      raise InvalidInput, "run_local is for local effects; this job's effect is #{spec.kind_name}" unless spec.effect == :local

      Keys.validate_op_key!(op_key)
      payload = Onceonly.payload(payload)
      return in_transaction(conn, op_key, payload, effect) if conn

      store.with_connection { |c| in_transaction(c, op_key, payload, effect) }
    end

    # Like run_local, inside a transaction the caller opened on `conn` (and
    # commits or rolls back): claim, the block, completion. For frameworks
    # that own the transaction (ActiveRecord::Base.transaction).
    def run_local_in(conn, op_key, payload = nil, &effect)
      raise InvalidInput, "run_local_in needs a block: the effect, given the connection and the context" unless effect

      kind, found = claim_in(conn, op_key, payload)
      return found if kind == :settled

      fault(:after_claim, found.ctx)
      result = local_effect(conn, found, effect)
      complete_in(conn, found, result)
    end

    private

    def in_transaction(conn, op_key, payload, effect)
      store.transaction(conn) { run_local_in(conn, op_key, payload, &effect) }
    end

    def local_effect(conn, local_claim, effect)
      Deadline.within(spec.timeout_ms / 1000.0) { effect.call(conn, local_claim.ctx) }
    rescue Timeout::Error
      raise LocalEffectFailed, "local effect of #{spec.job_type}:#{local_claim.op_key} timed out after " \
                               "#{Duration.format(spec.timeout_ms)}; its transaction rolled back"
    rescue InjectedCrash, LostClaim
      raise
    rescue StandardError => e
      raise LocalEffectFailed, "local effect of #{spec.job_type}:#{local_claim.op_key} failed, " \
                               "its transaction rolled back: #{e.class}: #{e.message}"
    end
  end
end
