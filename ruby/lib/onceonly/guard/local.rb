# frozen_string_literal: true

module Onceonly
  # A local effect's body raised; its transaction (claim included) rolled back.
  class LocalEffectFailed < Error; end

  # Local effects: claim and completion inside the caller's transaction, on
  # the caller's own connection (a PG::Connection or a SQLite3::Database on
  # the store's database), so the effect exists exactly once.
  class Guard
    # A claim taken inside the caller's transaction; `decider` and
    # `delivery` carry its decisions on to complete_in.
    LocalClaim = Struct.new(:claim, :op_key, :ctx, :decider, :delivery)

    # Claims a local operation inside the caller's open transaction on `conn`.
    # Returns [:claimed, LocalClaim] (do the effect, then complete_in, then
    # commit) or [:settled, outcome] (nothing to do).
    def claim_in(conn, op_key, payload = nil)
      Keys.validate_op_key!(op_key)
      payload = Onceonly.payload(payload)
      decider = Decide::Decider.new(@job, :local, payload.fingerprint)
      delivery = Delivery.new(op_key, payload, nil)
      decider.next # the claim
      answer = claim(delivery, conn: conn)
      step = decider.next(answer)
      case step["do"]
      when "fault"
        [:claimed, LocalClaim.new(delivery.claim, op_key, delivery.ctx, decider, delivery)]
      when "finish" then [:settled, Decide.outcome(step["outcome"])]
      else raise error_for(delivery, step["error"])
      end
    end

    # Completes a local claim inside the caller's transaction with the
    # effect's `result`; raises LostClaim (roll back) when the claim is no
    # longer ours.
    def complete_in(conn, local_claim, result)
      drive_local(conn, local_claim, "continue") { |_| { "done" => { "result" => result } } }
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

      after_claim = fault(found.delivery, Decide::FAULT_AFTER_CLAIM)
      drive_local(conn, found, after_claim) { |delivery| local_effect(conn, delivery, effect) }
    end

    private

    def in_transaction(conn, op_key, payload, effect)
      store.transaction(conn) { run_local_in(conn, op_key, payload, &effect) }
    end

    # The steps of a local claim after its after_claim fault point (answered
    # `after_claim`), on the caller's connection; the block answers the
    # perform step.
    def drive_local(conn, local_claim, after_claim)
      decider = local_claim.decider
      unless decider.phase == :local_after_claim
        raise InvalidInput, "#{spec.job_type}:#{local_claim.op_key}: this local claim is already completed"
      end

      delivery = local_claim.delivery
      answer = after_claim
      loop do
        step = decider.next(answer)
        answer =
          case step["do"]
          when "perform" then yield delivery
          when "fault" then fault(delivery, step)
          when "move" then move(delivery, step, conn: conn)
          when "read" then read(delivery, conn: conn)
          when "finish" then return Decide.outcome(step["outcome"])
          when "error" then raise error_for(delivery, step["error"])
          else raise ArgumentError, "unknown step #{step['do'].inspect} of a local effect"
          end
      end
    end

    # The local effect within the job timeout: {"done" => {"result"}},
    # {"raised" => why} or "timed_out".
    def local_effect(conn, delivery, effect)
      { "done" => { "result" => Deadline.within(spec.timeout_ms / 1000.0) { effect.call(conn, delivery.ctx) } } }
    rescue Timeout::Error
      "timed_out"
    rescue InjectedCrash, LostClaim
      raise
    rescue StandardError => e
      { "raised" => "#{e.class}: #{e.message}" }
    end
  end
end
