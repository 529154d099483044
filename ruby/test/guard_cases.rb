# frozen_string_literal: true

# The guard's transitions, run on every store (SqliteGuardTest, PgGuardTest).
# Leases expire by moving the store's clock, not by sleeping.
module GuardCases
  include FreshStores

  # An effect that counts its calls and can look up and withdraw.
  class Dest
    attr_reader :sent, :withdrawn
    attr_accessor :fail_with, :lookup_finds

    def initialize
      @sent = []
      @withdrawn = []
    end

    def perform(ctx)
      @sent << ctx.idempotency_key
      raise fail_with if fail_with

      Onceonly::Done.new(external_ref: "item-#{@sent.size}", result: { "n" => @sent.size })
    end

    def lookup(ctx)
      lookup_finds && Onceonly::Done.new(external_ref: "found", result: { "found" => ctx.idempotency_key })
    end

    def withdraw(_ctx, ref)
      @withdrawn << ref
      true
    end
  end

  def store
    @store ||= new_store
  end

  def guard(effect = :keyed, on_stale: nil, lease: 10, timeout: 5, **opts)
    spec = Onceonly::JobSpec.new(job_type: "t.#{effect}", effect: effect, on_stale: on_stale,
                                 lease: lease, timeout: timeout, heartbeat: opts.delete(:heartbeat))
    Onceonly::Guard.new(store, spec, **opts)
  end

  def row(g, key)
    store.op_get(g.spec.job_type, key).record
  end

  # A claim left by a worker that died right after claiming.
  def leave_claim(g, key, payload = { "p" => 1 })
    dying = Onceonly::Guard.new(store, g.spec, owner: "dead-worker",
                                               fault_hook: ->(point, _) { raise Onceonly::InjectedCrash, point if point == :after_claim })
    assert_raises(Onceonly::InjectedCrash) { dying.run(key, payload) { flunk "acted after a crash" } }
    assert_equal "claimed", row(g, key).state
  end

  def test_first_delivery_acts_and_repeats_get_the_stored_result
    g = guard
    dest = Dest.new
    first = g.run("k", { "a" => 1 }, dest)
    assert_equal Onceonly::Outcome::Done.new(result: { "n" => 1 }, external_ref: "item-1", repeat: false), first
    2.times do
      again = g.run("k", { "a" => 1 }, dest)
      assert again.repeat
      assert_equal({ "n" => 1 }, again.result)
    end
    assert_equal ["t.keyed:k"], dest.sent
    r = row(g, "k")
    assert_equal ["completed", 1, 1, '{"a":1}', "item-1"], [r.state, r.token, r.attempts, r.payload, r.external_ref]
  end

  def test_a_live_claim_is_left_alone_and_reported_in_progress
    g = guard(lease: 10)
    leave_claim(g, "k")
    out = guard.run("k", { "p" => 1 }) { flunk "acted on a live claim" }
    assert_kind_of Onceonly::Outcome::InProgress, out
    assert_equal "dead-worker", out.owner
    assert_equal 10_000, out.lease_ms
  end

  def test_another_payload_under_the_same_key_is_refused_and_nothing_written
    g = guard
    g.run("k", { "a" => 1 }) { 1 }
    before = row(g, "k")
    err = assert_raises(Onceonly::PayloadMismatch) { g.run("k", { "a" => 2 }) { flunk } }
    assert_match(/exists with another payload/, err.message)
    assert_equal before, row(g, "k")
  end

  def test_bad_input_raises_naming_the_problem_and_writes_nothing
    g = guard
    assert_match(/control character/, assert_raises(Onceonly::InvalidInput) { g.run("a\nb") { 1 } }.message)
    assert_match(/empty/, assert_raises(Onceonly::InvalidInput) { g.run("") { 1 } }.message)
    assert_match(/no JSON form/, assert_raises(Onceonly::InvalidInput) { g.run("k", { "t" => Object.new }) { 1 } }.message)
    assert_match(/needs an effect/, assert_raises(Onceonly::InvalidInput) { g.run("k") }.message)
    assert_empty store.op_list
  end

  def test_timing_rules_refuse_a_guard_naming_the_numbers
    err = assert_raises(Onceonly::TimingError) { guard(lease: 10, timeout: 10) }
    assert_match(/job timeout \(10s\) must be shorter than the lease \(10s\)/, err.message)
    err = assert_raises(Onceonly::TimingError) { guard(lease: 30, timeout: 300, heartbeat: 11) }
    assert_match(%r{heartbeat \(11s\) must renew the lease at least every lease/3 \(10s\)}, err.message)
    guard(lease: 30, timeout: 300, heartbeat: 10)
    assert_match(/unknown effect kind/, assert_raises(Onceonly::InvalidInput) { guard(:emailish) }.message)
    assert_match(/"1 minute" is not a duration/, assert_raises(Onceonly::InvalidInput) { guard(lease: "1 minute") }.message)
  end

  # Rust's max_retries is a u32: retries under one claim are bounded; -1
  # would retry a not-sent effect under the claim until the job timeout.
  def test_a_negative_max_retries_is_refused
    assert_match(/max_retries -1 must be 0 or more/, assert_raises(Onceonly::InvalidInput) { guard(max_retries: -1) }.message)
  end

  def test_keyed_stale_claim_is_taken_over_and_redone_with_the_same_key
    g = guard(:keyed, lease: 10)
    leave_claim(g, "k")
    store.advance_clock(10_001)
    dest = Dest.new
    out = g.run("k", { "p" => 1 }, dest)
    assert_equal false, out.repeat
    r = row(g, "k")
    assert_equal ["completed", 2, 2], [r.state, r.token, r.attempts]
    event = store.op_history(g.spec.job_type, "k").last
    assert_equal ["take_over", g.owner, 2, "claimed", "claimed"],
                 [event.event, event.actor, event.token, event.from_state, event.to_state]
    assert_match(/stale token 1: took over a claim of dead-worker/, event.detail)
  end

  def test_lookup_looks_first_after_a_stale_claim_and_completes_with_what_it_found
    g = guard(:lookup, lease: 10)
    leave_claim(g, "k")
    store.advance_clock(10_001)
    dest = Dest.new
    dest.lookup_finds = true
    out = g.run("k", { "p" => 1 }, dest)
    assert_equal "found", out.external_ref
    assert_empty dest.sent, "found by lookup: not sent again"
  end

  def test_opaque_hold_holds_a_stale_claim_for_a_person
    g = guard(:opaque, on_stale: :hold, lease: 10)
    leave_claim(g, "k")
    store.advance_clock(10_001)
    out = g.run("k", { "p" => 1 }) { flunk "acted under hold" }
    assert_kind_of Onceonly::Outcome::Held, out
    r = row(g, "k")
    assert_equal ["held", 2], [r.state, r.token]
    assert_equal "take_over", store.op_history(g.spec.job_type, "k").last.event
  end

  def test_opaque_at_most_once_gives_a_stale_claim_up
    g = guard(:opaque, on_stale: :at_most_once, lease: 10)
    leave_claim(g, "k")
    store.advance_clock(10_001)
    out = g.run("k", { "p" => 1 }) { flunk "acted under at-most-once" }
    assert_kind_of Onceonly::Outcome::Failed, out
    assert_equal "failed", row(g, "k").state
  end

  def test_opaque_at_least_once_redoes_once_then_holds
    g = guard(:opaque, on_stale: :at_least_once, lease: 10)
    leave_claim(g, "k")
    store.advance_clock(10_001)
    # The redo dies too: the second stale claim is held, not redone again.
    dying = Onceonly::Guard.new(store, g.spec, fault_hook: ->(p, _) { raise Onceonly::InjectedCrash, p if p == :after_effect })
    acted = 0
    assert_raises(Onceonly::InjectedCrash) { dying.run("k", { "p" => 1 }) { acted += 1 } }
    assert_equal [1, 2], [acted, row(g, "k").attempts]
    store.advance_clock(10_001)
    out = g.run("k", { "p" => 1 }) { acted += 1 }
    assert_kind_of Onceonly::Outcome::Held, out
    assert_equal 1, acted
  end

  def test_only_one_of_two_racing_take_overs_wins
    g = guard(:keyed, lease: 10)
    leave_claim(g, "k")
    store.advance_clock(10_001)
    stale = row(g, "k")
    a = store.op_take_over(job_type: stale.job_type, op_key: "k", stale_token: 1, to: "claimed", owner: "a", lease_ms: 10_000, reason: "x")
    b = store.op_take_over(job_type: stale.job_type, op_key: "k", stale_token: 1, to: "claimed", owner: "b", lease_ms: 10_000, reason: "x")
    assert_equal 2, a.token
    assert_nil b
  end

  def test_a_failure_write_never_lands_on_a_success
    g = guard
    g.run("k", { "a" => 1 }) { 1 }
    late = store.op_move(job_type: g.spec.job_type, op_key: "k", token: 1, from: "claimed", to: "failed", error: "late")
    assert_equal false, late
    assert_equal "completed", row(g, "k").state
  end

  def test_a_worker_whose_claim_was_taken_over_records_nothing_and_gets_lost_claim
    g = guard(:keyed, lease: 10)
    other = Onceonly::Guard.new(store, g.spec, owner: "other")
    err = assert_raises(Onceonly::LostClaim) do
      g.run("k", { "p" => 1 }) do
        store.advance_clock(10_001)
        other.run("k", { "p" => 1 }) { "other's result" }
        "mine"
      end
    end
    assert_equal 1, err.token
    r = row(g, "k")
    assert_equal ["completed", 2, '"other\'s result"'], [r.state, r.token, r.result]
    assert_equal "lost_claim", store.op_history(g.spec.job_type, "k").last.event
  end

  # Rust always records a done effect (its result is a JSON value): a result
  # that cannot be stored must not leave the claim unwritten for the policy.
  def test_a_done_effect_whose_result_is_not_json_is_still_recorded_completed
    g = guard(:keyed)
    out = g.run("k", 1) { Onceonly::Done.new(external_ref: "item-1", result: { "x" => Float::NAN }) }
    assert_equal Onceonly::Outcome::Done.new(result: nil, external_ref: "item-1", repeat: false), out
    r = row(g, "k")
    # The machine completes it with the result null (JSON) and the reason as its error.
    assert_equal ["completed", "item-1", "null"], [r.state, r.external_ref, r.result]
    assert_match(/not stored.*NaN/, r.error)
    assert_equal Onceonly::Outcome::Done.new(result: nil, external_ref: "item-1", repeat: true), g.run("k", 1) { flunk }
  end

  def test_not_sent_releases_the_claim_with_a_backoff
    g = guard(:keyed, max_retries: 0)
    out = g.run("k", { "p" => 1 }) { raise Onceonly::Effect::NotSent, "connection refused" }
    assert_equal Onceonly::Outcome::RetryLater.new(reason: "connection refused", retry_after_ms: 500), out
    r = row(g, "k")
    assert_equal ["queued", "connection refused"], [r.state, r.error]
    assert_kind_of Onceonly::Outcome::NotDue, g.run("k", { "p" => 1 }) { flunk "claimed before due" }
    store.advance_clock(500)
    assert_equal false, g.run("k", { "p" => 1 }) { "ok" }.repeat
    assert_equal 2, row(g, "k").attempts
  end

  def test_each_release_for_a_retry_is_in_the_history
    g = guard(:keyed, max_retries: 0)
    assert_kind_of Onceonly::Outcome::RetryLater, g.run("k", 1) { raise Onceonly::Effect::NotSent, "connection refused" }
    store.advance_clock(501)
    assert_kind_of Onceonly::Outcome::RetryLater, g.run("k", 1) { raise Onceonly::Effect::Unknown, "read timed out" }
    store.advance_clock(1001)
    assert_equal false, g.run("k", 1) { "ok" }.repeat
    events = store.op_history(g.spec.job_type, "k").map do |e|
      [e.event, e.actor, e.token, e.attempt, e.detail, e.retry_after_ms, e.from_state, e.to_state]
    end
    assert_equal [["retry", g.owner, 1, 1, "connection refused", 500, "claimed", "queued"],
                  ["retry", g.owner, 2, 2, "read timed out", 1000, "claimed", "queued"]], events
  end

  def test_an_unknown_event_name_is_read_not_refused
    store.op_audit(job_type: "t.keyed", op_key: "k", event: "a_future_event", actor: "someone", token: 1,
                   detail: "from a newer client")
    e = store.op_history("t.keyed", "k").first
    assert_equal ["a_future_event", "from a newer client", nil, nil], [e.event, e.detail, e.attempt, e.retry_after_ms]
  end

  def test_an_unknown_outcome_follows_the_kind
    assert_kind_of Onceonly::Outcome::RetryLater, guard(:keyed, max_retries: 0).run("k1", 1) { raise "reset" }
    assert_kind_of Onceonly::Outcome::Held, guard(:opaque).run("k2", 1) { raise Onceonly::Effect::Unknown, "timeout" }
    assert_kind_of Onceonly::Outcome::Failed, guard(:opaque, on_stale: :at_most_once).run("k3", 1) { raise "timeout" }
    assert_kind_of Onceonly::Outcome::RetryLater, guard(:opaque, on_stale: :at_least_once).run("k4", 1) { raise "x" }
    assert_equal "hold", store.op_history("t.opaque", "k2").last.event
    assert_equal %w[queued held failed queued], %w[k1 k2 k3 k4].zip(%w[t.keyed t.opaque t.opaque t.opaque]).map { |k, t| store.op_get(t, k).record.state }
  end

  def test_a_timed_out_effect_is_stopped_and_its_outcome_unknown
    g = guard(:opaque, lease: 2, timeout: 0.2)
    finished = false
    out = g.run("k", 1) do
      sleep 1
      finished = true
    end
    assert_kind_of Onceonly::Outcome::Held, out
    assert_equal "timed out after 200ms (the job timeout: the whole attempt, every request in it); the effect was stopped",
                 out.reason
    refute finished
  end

  # Nothing is sent during a retry's sleep: when the job timeout runs out in
  # it, the last try's report stands (not sent: released), not an unknown.
  def test_a_job_timeout_during_a_retry_sleep_records_the_last_report
    g = guard(:opaque, lease: 2, timeout: 0.1, max_retries: 5) # sleeps 20, 40, 80ms: the third outlasts 100ms
    tries = 0
    out = g.run("k", 1) do
      tries += 1
      raise Onceonly::Effect::NotSent, "connection refused"
    end
    assert_equal Onceonly::Outcome::RetryLater.new(reason: "connection refused", retry_after_ms: 500), out
    assert_equal 3, tries
    assert_equal "queued", row(g, "k").state
  end

  def test_an_owner_must_be_a_non_empty_string
    [nil, "", 42].each do |owner|
      err = assert_raises(Onceonly::InvalidInput) { guard(owner: owner) }
      assert_match(/owner must be a non-empty String/, err.message)
    end
  end

  def test_permanent_failure_is_recorded_failed
    g = guard(:keyed)
    out = g.run("k", 1) { raise Onceonly::Effect::PermanentFailure, "422 invalid address" }
    assert_equal Onceonly::Outcome::Failed.new(error: "422 invalid address"), out
    assert_equal "failed", store.op_history(g.spec.job_type, "k").last.event
  end

  def test_cancel_requested_while_the_effect_ran_withdraws_it
    g = guard(:keyed)
    dest = Dest.new
    # An operator asks to cancel while the effect runs (just after it, before completion).
    g.fault_hook = lambda do |point, ctx|
      store.op_request_cancel(job_type: ctx.job_type, op_key: ctx.op_key, token: ctx.token) if point == :after_effect
    end
    out = g.run("k", 1, dest)
    assert_equal Onceonly::Outcome::Cancelled.new(withdrawn_ref: "item-1"), out
    assert_equal ["item-1"], dest.withdrawn
    assert_equal ["cancelled", "compensated"], [row(g, "k").state, store.op_history(g.spec.job_type, "k").last.event]
  end

  def test_the_heartbeat_keeps_a_long_effect_s_claim_and_carries_a_cancel_request
    g = guard(:keyed, lease: 0.3, timeout: 3, heartbeat: 0.1)
    seen = nil
    out = g.run("k", 1) do |ctx|
      store.op_request_cancel(job_type: ctx.job_type, op_key: ctx.op_key, token: ctx.token)
      sleep 0.6 # twice the lease: only the heartbeat keeps the claim ours
      seen = ctx.cancel_requested?
      raise Onceonly::Effect::NotSent, "stopped: cancel requested"
    end
    assert seen, "the heartbeat carried the cancel request"
    assert_kind_of Onceonly::Outcome::Cancelled, out
  end

  def test_the_heartbeat_stops_an_effect_whose_claim_was_taken
    g = guard(:keyed, lease: 0.3, timeout: 3, heartbeat: 0.1)
    other = Onceonly::Guard.new(store, g.spec, owner: "other")
    reached_end = false
    assert_raises(Onceonly::LostClaim) do
      g.run("k", 1) do
        store.advance_clock(60_000)
        other.run("k", 1) { "theirs" }
        sleep 1
        reached_end = true
      end
    end
    refute reached_end
  end

  # An effect that asks for a cancel (as an operator would) and then finds it
  # could not send.
  def cancel_then_not_sent
    lambda do |ctx|
      assert store.op_request_cancel(job_type: ctx.job_type, op_key: ctx.op_key, token: ctx.token)
      raise Onceonly::Effect::NotSent, "connection refused"
    end
  end

  # protocol::cancel_unsent: the dead first claim may have sent, and a keyed
  # destination cannot be searched: held for a person, the request kept.
  def test_a_cancel_after_an_earlier_claim_holds_instead_of_cancelling
    g = guard(:keyed)
    leave_claim(g, "k")
    store.advance_clock(10_001)
    out = g.run("k", { "p" => 1 }, &cancel_then_not_sent)
    assert_kind_of Onceonly::Outcome::Held, out
    assert_match(/an earlier claim of this operation may have acted/, out.reason)
    r = row(g, "k")
    assert_equal ["held", 2, true], [r.state, r.token, r.cancel_requested]
    event = store.op_history(g.spec.job_type, "k").last
    assert_equal %w[hold claimed held], [event.event, event.from_state, event.to_state]
  end

  def test_a_cancel_after_a_lookup_found_nothing_cancels
    g = guard(:lookup)
    leave_claim(g, "k")
    store.advance_clock(10_001)
    effect = Struct.new(:perform_fn) do
      def perform(ctx) = perform_fn.call(ctx)
      def lookup(_ctx) = nil
    end.new(cancel_then_not_sent)
    assert_equal Onceonly::Outcome::Cancelled.new(withdrawn_ref: nil), g.run("k", { "p" => 1 }, effect)
    assert_equal "cancelled", row(g, "k").state
  end

  def test_a_cancel_on_the_first_claim_cancels
    g = guard(:keyed)
    assert_equal Onceonly::Outcome::Cancelled.new(withdrawn_ref: nil), g.run("k", 1, &cancel_then_not_sent)
    assert_equal "cancelled", row(g, "k").state
  end

  # The database unreachable from this worker's heartbeat alone: the effect
  # is stopped before the lease runs out (another worker may take it over
  # then), its outcome unknown; keyed: released to be redone.
  def test_an_unrenewed_lease_stops_the_effect_within_the_lease
    g = guard(:keyed, lease: 0.6, timeout: 20, heartbeat: 0.1)
    store.define_singleton_method(:op_heartbeat) { |**| raise Onceonly::DatabaseError, "no route from this worker" }
    acted = false
    stopped = nil
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    out = g.run("k", 1) do
      sleep 5
      acted = true
    ensure
      stopped = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
    elapsed = stopped - started # the claim was taken just after started
    assert_operator elapsed, :<, 0.6, "stopped within the lease it could not renew"
    assert_kind_of Onceonly::Outcome::RetryLater, out
    assert_match(/lease/, out.reason)
    refute acted, "the stopped effect never acts"
    assert_equal ["queued", 1], [row(g, "k").state, row(g, "k").token]
  end

  def test_local_effects_commit_with_the_claim_or_not_at_all
    g = guard(:local)
    store.with_connection { |c| create_effects_table(c) }
    store.with_connection do |conn|
      out = g.run_local("k", { "a" => 1 }, conn: conn) { |c, ctx| insert_effect(c, ctx.op_key) }
      assert_equal({ "rows" => 1 }, out.result)
      assert g.run_local("k", { "a" => 1 }, conn: conn) { |c, ctx| insert_effect(c, ctx.op_key) }.repeat
      err = assert_raises(Onceonly::LocalEffectFailed) do
        g.run_local("k2", nil, conn: conn) do |c, ctx|
          insert_effect(c, ctx.op_key)
          raise "disk full"
        end
      end
      assert_match(/rolled back: RuntimeError: disk full/, err.message)
      crashing = Onceonly::Guard.new(store, g.spec, fault_hook: ->(p, _) { raise Onceonly::InjectedCrash, p if p == :after_effect })
      assert_raises(Onceonly::InjectedCrash) { crashing.run_local("k3", nil, conn: conn) { |c, ctx| insert_effect(c, ctx.op_key) } }
      assert_equal [["k"]], effects(conn)
    end
    assert_nil store.op_get(g.spec.job_type, "k2")
    assert_nil store.op_get(g.spec.job_type, "k3")
    assert_equal "completed", row(g, "k").state
  end

  # protocol: `complete` is fenced by `cancel: not_requested` (Move::Complete
  # in the Rust local guard too): a cancel seen before the commit wins.
  def test_a_local_completion_is_refused_while_a_cancel_is_requested
    g = guard(:local)
    store.with_connection { |c| create_effects_table(c) }
    store.with_connection do |conn|
      assert_raises(Onceonly::LostClaim) do
        g.run_local("k", 1, conn: conn) do |c, ctx|
          assert_equal 1, store.send(:exec, c, :request_cancel, [ctx.job_type, ctx.op_key, ctx.token])
          insert_effect(c, ctx.op_key)
        end
      end
      assert_empty effects(conn)
    end
    assert_nil store.op_get(g.spec.job_type, "k"), "the claim and the effect rolled back"
  end

  def test_run_refuses_a_local_spec_and_run_local_the_others
    assert_match(/run_local/, assert_raises(Onceonly::InvalidInput) { guard(:local).run("k") { 1 } }.message)
    assert_match(/for local effects/, assert_raises(Onceonly::InvalidInput) { guard(:keyed).run_local("k") { 1 } }.message)
  end
end
