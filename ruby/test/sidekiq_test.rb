# frozen_string_literal: true

require_relative "test_helper"
require "onceonly/sidekiq"

REDIS_URL = ENV.fetch("ONCEONLY_TEST_REDIS", "redis://127.0.0.1:6379/13")
Sidekiq.configure_client { |c| c.redis = { url: REDIS_URL } }
Sidekiq.logger.level = Logger::ERROR
Redis.sadd_returns_boolean = false

# Counts effects per key, in the test process.
module Effects
  @counts = Hash.new(0)
  class << self
    attr_reader :counts
  end
end

class KeyedMail
  include Sidekiq::Job
  include Onceonly::Sidekiq.guard(key: ->(order_id, _to) { "order-#{order_id}" }, effect: :keyed, lease: 10, timeout: 5)

  def perform(order_id, to)
    Effects.counts[onceonly.idempotency_key] += 1
    { "sent_to" => to, "order" => order_id }
  end
end

class HeldMail
  include Sidekiq::Job
  include Onceonly::Sidekiq.guard(key: 0, effect: :opaque, on_stale: :hold, lease: 10, timeout: 5)

  def perform(order_id)
    Effects.counts["held:#{order_id}"] += 1
    raise Onceonly::Effect::Unknown, "read timeout" if order_id == "unknown"
  end
end

# A lookup job whose class defines no onceonly_lookup.
class RefusedMail
  include Sidekiq::Job
  include Onceonly::Sidekiq.guard(key: 0, effect: :keyed, lease: 10, timeout: 5, max_retries: 0)

  def perform(_order_id)
    raise Onceonly::Effect::NotSent, "connection refused"
  end
end

class LookupMail
  include Sidekiq::Job
  include Onceonly::Sidekiq.guard(key: 0, effect: :lookup, lease: 10, timeout: 5)

  def perform(order_id)
    Effects.counts["lookup:#{order_id}"] += 1
  end
end

# A job with no onceonly_withdraw; an operator asks to cancel while it runs.
class CancelledMail
  include Sidekiq::Job
  include Onceonly::Sidekiq.guard(key: 0, effect: :keyed, lease: 10, timeout: 5)

  def perform(order_id)
    ctx = onceonly.ctx
    Onceonly::Sidekiq.store.op_request_cancel(job_type: ctx.job_type, op_key: ctx.op_key, token: ctx.token)
    Effects.counts["cancelled:#{order_id}"] += 1
    Onceonly::Done.new(external_ref: "msg-#{order_id}", result: "sent")
  end
end

# The Sidekiq integration in this process, on real Redis and a real SQLite
# file: the outcomes, the push-time check, the retry delay, the re-drive.
class SidekiqTest < Minitest::Test
  include FreshStores

  def setup
    super
    Support.need_server!(self, "Redis at #{REDIS_URL}") { Sidekiq.redis(&:flushdb) }
    @store = new_store
    Onceonly::Sidekiq.store = @store
    [KeyedMail, HeldMail, LookupMail, CancelledMail, RefusedMail].each { |k| k.instance_variable_set(:@onceonly_guard, nil) }
    Effects.counts.clear
  end

  def new_store
    sqlite_store
  end

  def queued_jobs(queue = "default")
    Sidekiq.redis { |r| r.lrange("queue:#{queue}", 0, -1) }.map { |j| JSON.parse(j) }
  end

  def test_one_effect_per_key_and_repeats_return_the_stored_result
    first = KeyedMail.new.perform(42, "a@example.com")
    again = KeyedMail.new.perform(42, "a@example.com")
    assert_equal({ "sent_to" => "a@example.com", "order" => 42 }, first)
    assert_equal first, again
    assert_equal({ "KeyedMail:order-42" => 1 }, Effects.counts)
    r = @store.op_get("KeyedMail", "order-42").record
    assert_equal ["completed", '{"args":[42,"a@example.com"]}'], [r.state, r.payload]
  end

  def test_in_progress_elsewhere_goes_back_to_sidekiqs_retry_with_the_lease_left_as_delay
    spec = KeyedMail.onceonly_config.spec
    @store.op_claim(job_type: spec.job_type, op_key: "order-1", owner: "elsewhere", lease_ms: 10_000,
                    **Onceonly::Sidekiq::Config.new.payload_for([1, "x"]).then { |p| { fingerprint: p.fingerprint, payload: p.json } })
    err = assert_raises(Onceonly::Sidekiq::RetryLater) { KeyedMail.new.perform(1, "x") }
    assert_match(/in progress elsewhere/, err.message)
    assert_includes 10..11, err.retry_in
    assert_equal err.retry_in, KeyedMail.sidekiq_retry_in_block.call(0, err), "Sidekiq's retry uses the guard's delay"
    assert_nil KeyedMail.sidekiq_retry_in_block.call(0, RuntimeError.new), "other errors keep Sidekiq's own backoff"
    assert_empty Effects.counts
  end

  def test_a_released_delivery_asks_sidekiq_to_retry_after_its_backoff
    # Two claims left by dead workers, so this delivery's claim is the third:
    # released with the backoff 500ms * 2^2 = 2s, and Sidekiq asked for 2s.
    Onceonly::Sidekiq.fault_hook = ->(point, _) { raise Onceonly::InjectedCrash, point if point == :after_claim }
    begin
      2.times do
        assert_raises(Onceonly::InjectedCrash) { RefusedMail.new.perform("r1") }
        @store.advance_clock(10_001)
      end
    ensure
      Onceonly::Sidekiq.fault_hook = nil
    end
    err = assert_raises(Onceonly::Sidekiq::RetryLater) { RefusedMail.new.perform("r1") }
    assert_equal [2000, 2], [err.outcome.retry_after_ms, err.retry_in]
    assert_equal ["queued", 3], @store.op_get("RefusedMail", "r1").record.then { |r| [r.state, r.attempts] }
  end

  def test_held_is_logged_not_retried
    assert_nil HeldMail.new.perform("unknown")
    assert_nil HeldMail.new.perform("unknown"), "a held operation is left for a person"
    assert_equal 1, Effects.counts["held:unknown"]
    assert_equal "held", @store.op_get("HeldMail", "unknown").record.state
  end

  def test_bad_keys_are_refused_at_push_and_nothing_is_written
    err = assert_raises(Onceonly::InvalidInput) { HeldMail.perform_async("bad\nkey") }
    assert_match(/control character U\+000A/, err.message)
    assert_raises(Onceonly::InvalidInput) { KeyedMail.perform_async(1, Object.new) }
    assert_empty queued_jobs
    assert_empty @store.op_list
  end

  def test_a_push_records_the_operation_queued_and_refuses_another_payload_under_its_key
    KeyedMail.perform_async(5, "c@example.com")
    KeyedMail.perform_async(5, "c@example.com") # a re-enqueued second job: same operation
    r = @store.op_get("KeyedMail", "order-5").record
    assert_equal ["queued", '{"args":[5,"c@example.com"]}'], [r.state, r.payload]
    err = assert_raises(Onceonly::PayloadMismatch) { KeyedMail.perform_async(5, "other@example.com") }
    assert_match(/KeyedMail:order-5 exists with another payload/, err.message)
    assert_equal 2, queued_jobs.size
    queued_jobs.each { |j| KeyedMail.new.perform(*j["args"]) }
    assert_equal({ "KeyedMail:order-5" => 1 }, Effects.counts)
  end

  def test_a_job_dropped_before_its_claim_is_pushed_again_by_the_redrive
    KeyedMail.perform_async(6, "d@example.com")
    Sidekiq.redis { |r| r.del("queue:default") } # fetched by a process that died at once
    assert_empty Onceonly::Sidekiq::Redrive.run
    @store.advance_clock(10_001)
    assert_equal [%w[order-6 queued]], Onceonly::Sidekiq::Redrive.run.map { |p| [p.op_key, p.state] }
    queued_jobs.each { |j| KeyedMail.new.perform(*j["args"]) }
    assert_equal "completed", @store.op_get("KeyedMail", "order-6").record.state
  end

  def test_bad_settings_are_refused_when_the_class_loads
    err = assert_raises(Onceonly::TimingError) do
      Class.new { include Sidekiq::Job; include Onceonly::Sidekiq.guard(key: 0, effect: :keyed, job_type: "x", lease: 5, timeout: 5) }
    end
    assert_match(/job timeout \(5s\) must be shorter than the lease \(5s\)/, err.message)
    assert_raises(Onceonly::InvalidInput) { Onceonly::Sidekiq.guard(key: "order_id", effect: :keyed) }
  end

  def test_sidekiqs_shutdown_timeout_must_outlast_the_job_timeout
    assert Onceonly::Sidekiq.check_timing!(shutdown_timeout: 25)
    err = assert_raises(Onceonly::TimingError) { Onceonly::Sidekiq.check_timing!(shutdown_timeout: 5) }
    assert_match(/job KeyedMail: Sidekiq's shutdown timeout \(5s\) must be longer than the job timeout \(5s\)/, err.message)
  end

  def test_the_redrive_pushes_a_stale_claim_again_once_and_the_guard_settles_it_by_policy
    die = ->(point, _) { raise Onceonly::InjectedCrash, point if point == :after_claim }
    Onceonly::Sidekiq.fault_hook = die
    assert_raises(Onceonly::InjectedCrash) { KeyedMail.new.perform(7, "b@example.com") }
    assert_raises(Onceonly::InjectedCrash) { HeldMail.new.perform("h7") }
    Onceonly::Sidekiq.fault_hook = nil

    assert_empty Onceonly::Sidekiq::Redrive.run, "claims within their lease are not pushed"
    @store.advance_clock(10_001)
    pushed = Onceonly::Sidekiq::Redrive.run
    assert_equal [%w[KeyedMail order-7], %w[HeldMail h7]].sort, pushed.map { |p| [p.job_type, p.op_key] }.sort
    assert_empty Onceonly::Sidekiq::Redrive.run, "pushed once per stale token within the lease"
    jobs = queued_jobs
    assert_equal [["HeldMail", ["h7"]], ["KeyedMail", [7, "b@example.com"]]], jobs.map { |j| [j["class"], j["args"]] }.sort

    jobs.each { |j| Object.const_get(j["class"]).new.perform(*j["args"]) }
    assert_equal ["completed", 2], @store.op_get("KeyedMail", "order-7").record.then { |r| [r.state, r.token] }
    assert_equal "held", @store.op_get("HeldMail", "h7").record.state
    assert_equal({ "KeyedMail:order-7" => 1 }, Effects.counts, "keyed redone once; hold did not act")
  end

  def test_a_lookup_job_without_onceonly_lookup_releases_a_stale_claim_as_lookup_unavailable
    # As the Rust guard (an effect with no lookup is "unavailable"): not sent, released for later.
    Onceonly::Sidekiq.fault_hook = ->(point, _) { raise Onceonly::InjectedCrash, point if point == :after_claim }
    assert_raises(Onceonly::InjectedCrash) { LookupMail.new.perform("l1") }
    Onceonly::Sidekiq.fault_hook = nil
    @store.advance_clock(10_001)
    err = assert_raises(Onceonly::Sidekiq::RetryLater) { LookupMail.new.perform("l1") }
    assert_match(/lookup unavailable/, err.message)
    r = @store.op_get("LookupMail", "l1").record
    assert_equal ["queued", 2], [r.state, r.token]
    assert_empty Effects.counts
    # The release is in the history: the take-over's claim, attempt 2, due again after 1s.
    events = @store.op_history("LookupMail", "l1").map { |e| [e.event, e.token, e.attempt, e.retry_after_ms] }
    assert_equal [["take_over", 2, nil, nil], ["retry", 2, 2, 1000]], events
  end

  def test_a_cancel_while_a_job_without_onceonly_withdraw_ran_leaves_it_completed_and_says_so
    # As the Rust guard: no withdraw is "this effect cannot be withdrawn"; recorded, not left claimed.
    assert_nil CancelledMail.new.perform("c1")
    r = @store.op_get("CancelledMail", "c1").record
    assert_equal ["completed", '"sent"', "msg-c1"], [r.state, r.result, r.external_ref]
    assert_match(/withdraw failed/, r.error)
    assert_equal %w[withdraw_failed], @store.op_history("CancelledMail", "c1").map(&:event)
  end
end

# The same on MySQL/MariaDB.
class MysqlSidekiqTest < SidekiqTest
  def new_store
    mysql_store
  end
end
