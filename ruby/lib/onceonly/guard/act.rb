# frozen_string_literal: true

module Onceonly
  # The guard as the interpreter of Onceonly::Decide: each step the decider
  # gives is run here (a statement, the effect within the job timeout and
  # under the heartbeat, a sleep, an audit append, the fault hook) and what it
  # returned is the decider's next answer. Nothing here decides.
  class Guard
    # What the effect may do between the claim and the record: steps that
    # keep the job timeout running and the heartbeat beating.
    EFFECT_STEPS = %w[lookup cancel_requested perform sleep fault].freeze
    private_constant :EFFECT_STEPS

    private

    # Runs the decider's steps for one delivery until its end: the Outcome,
    # or the error raised.
    def drive(decider, delivery)
      answer = nil
      loop do
        step = decider.next(answer)
        kind = step["do"]
        delivery.heartbeat = delivery.heartbeat.stop if delivery.heartbeat && !EFFECT_STEPS.include?(kind)
        answer =
          case kind
          when "claim" then claim(delivery)
          when "take_over" then take_over(delivery, step)
          when "read" then read(delivery)
          when "move" then move(delivery, step)
          when "audit" then audit_step(delivery, step)
          when "fault" then fault(delivery, step)
          when "cancel_requested" then effect_phase(delivery).ctx.cancel_requested?
          when "perform" then bounded(effect_phase(delivery)) { call_effect(delivery.ctx, delivery.effect) }
          when "lookup" then lookup(effect_phase(delivery))
          when "sleep" then pause(delivery, step["ms"])
          when "withdraw" then withdraw(delivery, step["external_ref"])
          when "finish" then return Decide.outcome(step["outcome"])
          when "error" then raise error_for(delivery, step["error"])
          else raise ArgumentError, "unknown step #{kind.inspect}"
          end
      end
    ensure
      delivery.heartbeat&.stop
    end

    def claim(delivery, conn: nil)
      kind, found = store.op_claim(job_type: spec.job_type, op_key: delivery.op_key,
                                   fingerprint: delivery.payload.fingerprint, payload: delivery.payload.json,
                                   owner: owner, lease_ms: spec.lease_ms, conn: conn)
      if kind == :claimed
        delivery.claim = found
        delivery.ctx = ctx_for(delivery.op_key, found, delivery.payload)
        return { "claimed" => { "token" => found.token, "attempts" => found.attempts } }
      end

      delivery.snapshot = found
      { "existing" => Decide.row(found) }
    end

    def take_over(delivery, step)
      to = Protocol.take_over_to(step["settle"].to_sym)
      taken = store.op_take_over(job_type: spec.job_type, op_key: delivery.op_key, stale_token: step["stale_token"],
                                 to: to, owner: owner, lease_ms: spec.lease_ms, reason: step["reason"])
      Onceonly.logger.info("onceonly: stale claim #{spec.job_type}:#{delivery.op_key} token #{step['stale_token']} " \
                           "-> #{to} (#{taken ? 'won' : 'lost the race'})")
      return nil unless taken

      delivery.claim = taken
      delivery.ctx = ctx_for(delivery.op_key, taken, delivery.payload)
      { "token" => taken.token, "attempts" => taken.attempts }
    end

    # The owner's move the step names (Protocol::OWNER_MOVES): true when it
    # changed the row.
    def move(delivery, step, conn: nil)
      store.op_move(**Protocol.owner_op(step["move"], job_type: spec.job_type, op_key: delivery.op_key,
                                                      token: step["token"], external_ref: step["external_ref"],
                                                      result: step["result"], error: step["error"],
                                                      retry_after_ms: step["retry_after_ms"], conn: conn))
    end

    def audit_step(delivery, step)
      event = step["event"]
      if [Protocol::COMPENSATED, Protocol::WITHDRAW_FAILED].include?(event)
        Onceonly.logger.warn("onceonly: compensation of #{spec.job_type}:#{delivery.op_key}: #{step['detail']}")
      end
      audit(delivery.op_key, event, step["token"], step["from"], step["to"], step["detail"],
            attempt: step["attempt"], retry_after_ms: step["retry_after_ms"])
      nil
    end

    # The fault hook at the step's point: "crash" when it raised InjectedCrash.
    def fault(delivery, step)
      fault_hook&.call(step["point"].to_sym, delivery.ctx)
      "continue"
    rescue InjectedCrash
      "crash"
    end

    # The job timeout runs from the first step of the effect (the lookup or
    # the cancel check before it) over every try and sleep under the claim;
    # the heartbeat, when the spec has one, beats as long.
    def effect_phase(delivery)
      return delivery if delivery.deadline_at

      delivery.deadline_at = monotonic + (spec.timeout_ms / 1000.0)
      delivery.heartbeat = Heartbeat.new(store, spec, delivery.ctx) if spec.heartbeat_ms
      delivery
    end

    # The block (the effect's perform or lookup) within what is left of the
    # job timeout, stopped by the heartbeat when the claim is lost or its
    # lease could not be renewed: its answer, "timed_out", "claim_lost" or
    # {"lease_unrenewed" => why}.
    def bounded(delivery, &block)
      left = delivery.deadline_at - monotonic
      return "timed_out" if left <= 0

      heartbeat = delivery.heartbeat
      return Deadline.within(left, &block) unless heartbeat

      Deadline.within(left) { heartbeat.watching(&block) }
    rescue Timeout::Error
      "timed_out"
    rescue ClaimGone, LeaseNotRenewed
      heartbeat.stopped
    end

    def monotonic
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    def call_effect(ctx, effect)
      value = effect.perform(ctx)
      if value.is_a?(Onceonly::Done)
        { "done" => { "external_ref" => value.external_ref, "result" => value.result } }
      else
        { "done" => { "external_ref" => nil, "result" => value } }
      end
    rescue Effect::NotSent => e
      { "not_sent" => e.message }
    rescue Effect::PermanentFailure => e
      { "failed" => e.message }
    rescue Effect::Unknown => e
      { "unknown" => e.message }
    rescue InjectedCrash, LostClaim
      raise
    rescue StandardError => e
      { "unknown" => "#{e.class}: #{e.message}" }
    end

    def lookup(delivery)
      effect = delivery.effect
      return { "unavailable" => "a lookup effect needs #lookup(ctx)" } unless effect.respond_to?(:lookup)

      bounded(delivery) { look_up(delivery.ctx, effect) }
    end

    def look_up(ctx, effect)
      found = effect.lookup(ctx)
      return "not_found" if found.nil? || found == false
      return { "found" => { "external_ref" => found.external_ref, "result" => found.result } } if found.is_a?(Onceonly::Done)

      { "found" => { "external_ref" => nil, "result" => found } }
    rescue StandardError => e
      { "unavailable" => said(e) }
    end

    # What an exception from an effect's lookup or withdraw says: an
    # Onceonly::Error its message (words meant for the record), any other
    # its class and message.
    def said(error)
      error.is_a?(Onceonly::Error) ? error.message : "#{error.class}: #{error.message}"
    end

    # A retry's sleep under the claim: "timed_out" when the job timeout runs
    # out first (then slept until it did); the heartbeat's stop when it
    # stopped meanwhile.
    def pause(delivery, ms)
      Onceonly.logger.debug("onceonly: retrying #{spec.job_type}:#{delivery.op_key} under the claim in #{ms}ms")
      left = delivery.deadline_at - monotonic
      if left * 1000 <= ms
        sleep(left) if left.positive?
        return "timed_out"
      end
      sleep(ms / 1000.0)
      delivery.heartbeat&.stopped || "slept"
    end

    def withdraw(delivery, external_ref)
      effect = delivery.effect
      return { "not_withdrawn" => "this effect cannot be withdrawn" } unless effect.respond_to?(:withdraw)
      return "withdrawn" if effect.withdraw(delivery.ctx, external_ref)

      { "not_withdrawn" => "the destination did not confirm the withdraw" }
    rescue StandardError => e
      { "not_withdrawn" => said(e) }
    end

    # The Onceonly::Error an "error" step names.
    def error_for(delivery, error)
      kind, v = error.first
      name = "#{spec.job_type}:#{delivery.op_key}"
      case kind
      when "lost_claim" then LostClaim.new(token: v["token"], record: delivery.snapshot.record)
      when "payload_mismatch"
        PayloadMismatch.new(job_type: spec.job_type, op_key: delivery.op_key, stored: v["stored"], offered: v["offered"])
      when "not_found" then NotFound.new("#{name} is not in the database (purged?)")
      when "injected_crash" then InjectedCrash.new(v["point"].to_sym)
      when "local_effect_failed"
        LocalEffectFailed.new("local effect of #{name} failed, its transaction rolled back: #{v['why']}")
      when "timeout"
        LocalEffectFailed.new("local effect of #{name} timed out after #{Duration.format(v['timeout_ms'])}; " \
                              "its transaction rolled back")
      else Error.new("#{name}: #{kind}: #{v.inspect}")
      end
    end

    # Renews the lease every heartbeat interval while the effect runs, and
    # carries an operator's cancel request to the effect's context. Stops the
    # effect (raises in it) when the claim turns out lost, or when the lease
    # can no longer be renewed before it runs out.
    class Heartbeat
      # nil while beating; then the effect's answer: "claim_lost" or
      # {"lease_unrenewed" => why}.
      def stopped
        @lock.synchronize { @stopped }
      end

      def initialize(store, spec, ctx)
        @lock = Mutex.new
        @wake = ConditionVariable.new
        @done = false
        @stopped = nil
        @worker = nil
        @thread = Thread.new { beat(store, spec, ctx) }
      end

      # The block's value, or the stop's answer when the heartbeat stopped it
      # (or had stopped before it began).
      def watching
        @lock.synchronize do
          return @stopped if @stopped

          @worker = Thread.current
        end
        begin
          yield
        ensure
          @lock.synchronize { @worker = nil }
        end
      rescue ClaimGone, LeaseNotRenewed
        stopped
      end

      # Ends the heartbeat; returns nil.
      def stop
        @lock.synchronize do
          @done = true
          @wake.signal
        end
        @thread.join
        nil
      end

      private

      def beat(store, spec, ctx)
        interval = spec.heartbeat_ms / 1000.0
        # The claim was taken about now; the effect must not go on past a
        # lease that could not be renewed.
        renewed = monotonic
        loop do
          @lock.synchronize { @wake.wait(@lock, interval) unless @done }
          break if @lock.synchronize { @done }

          begin
            hb = store.op_heartbeat(job_type: ctx.job_type, op_key: ctx.op_key, token: ctx.token, lease_ms: spec.lease_ms)
          rescue Error => e
            if monotonic - renewed + interval >= spec.lease_ms / 1000.0
              Onceonly.logger.warn("onceonly: lease of #{ctx.job_type}:#{ctx.op_key} not renewed (#{e.message}); " \
                                   "stopping the effect")
              break halt({ "lease_unrenewed" => e.message }, LeaseNotRenewed)
            end
            Onceonly.logger.warn("onceonly: heartbeat of #{ctx.job_type}:#{ctx.op_key} failed (#{e.message}); will retry")
            next
          end
          break halt("claim_lost", ClaimGone) unless hb

          renewed = monotonic
          ctx.cancel_requested = hb[:cancel_requested]
        end
      end

      def halt(answer, exception)
        @lock.synchronize do
          @stopped = answer
          @worker&.raise(exception)
        end
      end

      def monotonic
        Process.clock_gettime(Process::CLOCK_MONOTONIC)
      end
    end

    public

    # How long a released operation waits before it is due again: 500ms after
    # the first claim, doubling per claim, at most a minute (as the Rust guard).
    def self.retry_backoff_ms(attempt)
      Decide.retry_backoff_ms(attempt)
    end
  end
end
