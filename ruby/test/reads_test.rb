# frozen_string_literal: true

require_relative "test_helper"

# store.get / held / stuck / history on each store, with the clock moved
# instead of waiting: what the CLI's inspect, held, stuck and history show.
module ReadsCases
  include FreshStores

  PAYLOAD = { "to" => "a@example.com" }.freeze
  CRASH = ->(point, _) { raise Onceonly::InjectedCrash, point if point == :after_claim }

  def guard(job_type, effect, on_stale: nil, fault_hook: nil, owner: Onceonly.new_owner)
    spec = Onceonly::JobSpec.new(job_type: job_type, effect: effect, on_stale: on_stale, lease: 10, timeout: 5)
    Onceonly::Guard.new(@store, spec, fault_hook: fault_hook, owner: owner)
  end

  # A claim left by a worker that died after claiming.
  def leave_claim(job_type, key, effect: :keyed, on_stale: nil, owner: "dead-worker")
    g = guard(job_type, effect, on_stale: on_stale, fault_hook: CRASH, owner: owner)
    assert_raises(Onceonly::InjectedCrash) { g.run(key, PAYLOAD) { flunk } }
  end

  def test_get_returns_the_record_or_nil_and_names_a_bad_key
    assert_nil @store.get("mail", "none")
    guard("mail", :keyed).run("k-1", PAYLOAD) { Onceonly::Done.new(external_ref: "item-9", result: "sent") }
    r = @store.get("mail", "k-1")
    assert_equal ["completed", 1, "item-9", '"sent"', '{"to":"a@example.com"}'],
                 [r.state, r.token, r.external_ref, r.result, r.payload]
    assert_match(/control character/, assert_raises(Onceonly::InvalidInput) { @store.get("mail", "a\nb") }.message)
    assert_raises(Onceonly::InvalidInput) { @store.get("bad type!", "k") }
  end

  def test_held_lists_operations_waiting_for_a_person_oldest_first_by_job_and_page
    %w[h-1 h-2 h-3].each do |key|
      leave_claim("mail.opaque", key, effect: :opaque, on_stale: :hold)
      @store.advance_clock(1_000) # each claim a second older than the next
    end
    leave_claim("other.opaque", "o-1", effect: :opaque, on_stale: :hold)
    assert_empty @store.held, "stale claims are stuck, not held, until a delivery applies the policy"
    @store.advance_clock(10_001)
    %w[h-1 h-2 h-3].each { |k| assert_kind_of Onceonly::Outcome::Held, guard("mail.opaque", :opaque).run(k, PAYLOAD) { flunk } }
    guard("other.opaque", :opaque).run("o-1", PAYLOAD) { flunk }

    held = @store.held(job_type: "mail.opaque")
    assert_equal %w[h-1 h-2 h-3], held.map { |l| l.record.op_key }
    assert(held.all? { |l| l.record.state == "held" && l.lease_ms.nil? && l.over_lease_ms.nil? })
    ages = held.map(&:age_ms)
    assert_equal ages.sort.reverse, ages, "oldest first"
    assert_operator ages.first - ages.last, :>=, 2_000
    assert_equal %w[h-1 h-2 h-3 o-1].sort, @store.held.map { |l| l.record.op_key }.sort
    assert_equal %w[h-2], @store.held(job_type: "mail.opaque", limit: 1, offset: 1).map { |l| l.record.op_key }
    h = held.first.to_h
    assert_equal %w[held mail.opaque h-1], h.values_at("state", "job", "key")
    assert_match(/\A\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\z/, h["now"])
    assert_raises(Onceonly::InvalidInput) { @store.held(limit: 0) }
    assert_raises(Onceonly::InvalidInput) { @store.held(offset: -1) }
  end

  def test_stuck_lists_claims_past_their_lease_and_older_than_narrows_by_how_long_ago
    leave_claim("mail", "s-1")
    leave_claim("mail", "s-2")
    guard("mail", :keyed).run("done", PAYLOAD) { "sent" }
    assert_empty @store.stuck, "live claims are not stuck"
    @store.advance_clock(10_001)
    stuck = @store.stuck
    assert_equal %w[s-1 s-2], stuck.map { |l| l.record.op_key }
    first = stuck.first
    assert_equal [10_000, "claimed", "dead-worker"], [first.lease_ms, first.record.state, first.record.owner]
    assert_includes 1..5_000, first.over_lease_ms
    assert_empty @store.stuck(older_than: "5s"), "the lease ran out 1s ago, not 5s"
    @store.advance_clock(5_000)
    assert_equal %w[s-1 s-2], @store.stuck(older_than: "5s").map { |l| l.record.op_key }
    assert_equal %w[s-1 s-2], @store.stuck(older_than: 5).map { |l| l.record.op_key }
    assert_empty @store.stuck(job_type: "other")
    assert_match(/older_than "soon" is not a duration/, assert_raises(Onceonly::InvalidInput) { @store.stuck(older_than: "soon") }.message)
  end

  def test_history_gives_the_record_and_its_audit_trail_oldest_first
    leave_claim("mail", "t-1")
    @store.advance_clock(10_001)
    g = guard("mail", :keyed)
    g.run("t-1", PAYLOAD) { raise Onceonly::Effect::NotSent, "refused" }
    h = @store.history("mail", "t-1")
    assert_equal %w[queued], [h.record.state]
    assert_equal %w[take_over retry], h.events.map(&:event)
    lines = h.to_a
    assert_equal %w[record event event], lines.map { |l| l["kind"] }
    assert_equal ["retry", 2, "refused", g.owner], lines.last.values_at("event", "attempt", "detail", "actor")
    err = assert_raises(Onceonly::NotFound) { @store.history("mail", "none") }
    assert_match(/no record, so no history/, err.message)
  end
end

class SqliteReadsTest < Minitest::Test
  include ReadsCases

  def setup
    super
    @store = sqlite_store
  end
end

class PgReadsTest < Minitest::Test
  include ReadsCases

  def setup
    super
    @store = pg_store
  end
end

class MysqlReadsTest < Minitest::Test
  include ReadsCases

  def setup
    super
    @store = mysql_store
  end
end
