# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/destination"
require "open3"
require "net/http"

# Records written by Ruby are read, migrated, taken over and resolved by the
# Rust CLI, and the other way round, on SQLite, PostgreSQL and MySQL/MariaDB.
module CrossLanguageCases
  include FreshStores

  PAYLOAD = { "to" => "a@example.com", "amount" => 19.99 }.freeze

  def setup
    super
    @dest = Destination.new
    @cleanups << -> { @dest.stop }
  end

  def cli(*args, timeout: 60)
    out, err, status = Open3.capture3(Support.onceonly_bin, "--db", db_url, *args.map(&:to_s))
    assert status.success?, "onceonly #{args.join(' ')} failed (#{status}):\n#{out}\n#{err}"
    out
  end

  def store
    @store ||= begin
      s = Onceonly.connect(db_url)
      s.migrate
      s
    end
  end

  def keyed_guard(lease:, timeout:, **opts)
    spec = Onceonly::JobSpec.new(job_type: "mail.keyed", effect: :keyed, lease: lease, timeout: timeout)
    Onceonly::Guard.new(store, spec, **opts)
  end

  # Sends like the Rust relay: POST /items with the idempotency key.
  def post(ctx)
    uri = URI("#{@dest.url}/items")
    res = Net::HTTP.post(uri, JSON.generate(ctx.payload), "Idempotency-Key" => ctx.idempotency_key,
                                                          "Content-Type" => "application/json")
    Onceonly::Done.new(external_ref: JSON.parse(res.body)["id"], result: { "status" => res.code.to_i })
  end

  def test_a_database_migrated_by_ruby_is_current_for_the_cli_and_the_other_way_round
    store # Ruby migrates
    assert_match(/migrated/, cli("migrate"))
    assert_equal 0, store.migrate
    other = fresh_db_url
    out, err, status = Open3.capture3(Support.onceonly_bin, "--db", other, "migrate")
    assert status.success?, out + err
    assert_equal 0, Onceonly.connect(other).migrate, "the CLI applied every migration Ruby knows"
  end

  def test_records_written_by_ruby_read_by_the_operator_commands
    g = keyed_guard(lease: 10, timeout: 5)
    g.run("done-1", PAYLOAD) { |ctx| post(ctx) }
    held = Onceonly::Guard.new(store, Onceonly::JobSpec.new(job_type: "mail.opaque", effect: :opaque, lease: 10, timeout: 5))
    held.run("held-1", PAYLOAD) { raise Onceonly::Effect::Unknown, "read timeout" }
    rows = cli("inspect", "--json").lines.map { |l| JSON.parse(l) }
    by_key = rows.to_h { |r| [r["key"], r] }
    assert_equal %w[completed held], [by_key["done-1"]["state"], by_key["held-1"]["state"]]
    assert_equal JSON.generate(PAYLOAD.sort.to_h), by_key["done-1"]["payload"]
    assert_match(/held-1/, cli("held"))
    assert_match(/hold .*read timeout/, cli("history", "--job", "mail.opaque", "--key", "held-1"))
    cli("resolve", "--job", "mail.opaque", "--key", "held-1", "--as", "queued", "--reason", "checked: not sent")
    assert_equal "queued", store.op_get("mail.opaque", "held-1").record.state
    # The resolved operation is done by the next Ruby delivery, once.
    store.advance_clock(60_000)
    assert_equal false, held.run("held-1", PAYLOAD) { "sent" }.repeat
    cli("cancel", "--job", "mail.keyed", "--key", "done-1", "--http", @dest.url)
    assert_equal "cancelled", store.op_get("mail.keyed", "done-1").record.state
  end

  def test_a_claim_left_by_ruby_is_taken_over_by_the_cli_relay
    dying = keyed_guard(lease: 1, timeout: 0.5, owner: "ruby-dead",
                        fault_hook: ->(p, _) { raise Onceonly::InjectedCrash, p if p == :after_claim })
    assert_raises(Onceonly::InjectedCrash) { dying.run("order-7", PAYLOAD) { flunk } }
    sleep 1.1 # the CLI reads the database's real clock: the lease must really pass
    assert_match(/order-7/, cli("stuck", "--job", "mail.keyed"), "the operator sees Ruby's stale claim")
    cli("run", "--job", "mail.keyed", "--http", @dest.url, "--effect", "keyed", "--lease", "5s",
        "--timeout", "2s", "--drain")
    r = store.op_get("mail.keyed", "order-7").record
    assert_equal ["completed", 2, 2, "item-1"], [r.state, r.token, r.attempts, r.external_ref]
    assert_equal [["mail.keyed:order-7", JSON.generate(PAYLOAD.sort.to_h)]], @dest.posts
    take_over = store.op_history("mail.keyed", "order-7").find { |e| e.event == "take_over" }
    refute_nil take_over
    refute_equal "ruby-dead", take_over.actor
    assert_match(/ruby-dead/, take_over.detail)
    # A later Ruby delivery is a repeat with the relay's result.
    assert dying.run("order-7", PAYLOAD) { flunk }.repeat
  end

  def test_a_claim_left_by_the_cli_is_taken_over_from_ruby
    cli("enqueue", "--job", "mail.keyed", "--key", "order-8", "--payload", JSON.generate(PAYLOAD))
    @dest.hang = true
    pid = spawn(Support.onceonly_bin, "--db", db_url, "run", "--job", "mail.keyed", "--http", @dest.url,
                "--effect", "keyed", "--lease", "30s", "--timeout", "10s", out: File::NULL, err: File::NULL)
    deadline = Time.now + 20
    sleep 0.05 until @dest.posts.any? || Time.now > deadline
    Process.kill(:KILL, pid)
    Process.wait(pid)
    @dest.hang = false
    left = store.op_get("mail.keyed", "order-8").record
    assert_equal ["claimed", 1], [left.state, left.token], "the CLI died holding the claim while sending"
    g = keyed_guard(lease: 10, timeout: 5)
    assert_kind_of Onceonly::Outcome::InProgress, g.run("order-8", PAYLOAD) { flunk "took a live claim" }
    store.advance_clock(30_001)
    out = g.run("order-8", PAYLOAD) { |ctx| post(ctx) }
    assert_equal "item-1", out.external_ref, "the same idempotency key: the destination kept one item"
    r = store.op_get("mail.keyed", "order-8").record
    assert_equal ["completed", 2, 2, g.owner], [r.state, r.token, r.attempts, r.owner]
    assert_equal 1, @dest.items.size
    assert_match(/take_over\s+#{Regexp.escape(g.owner)}\s+2\s+claimed -> claimed/,
                 cli("history", "--job", "mail.keyed", "--key", "order-8"))
  end

  def test_a_retry_written_by_ruby_is_in_the_cli_history
    g = keyed_guard(lease: 10, timeout: 5, max_retries: 0)
    out = g.run("k", PAYLOAD) { raise Onceonly::Effect::NotSent, "connection refused" }
    assert_kind_of Onceonly::Outcome::RetryLater, out
    store.advance_clock(501)
    assert_equal false, g.run("k", PAYLOAD) { |ctx| post(ctx) }.repeat
    rows = cli("history", "--job", "mail.keyed", "--key", "k", "--json").lines.map { |l| JSON.parse(l) }
    assert_equal %w[record completed], [rows[0]["kind"], rows[0]["state"]]
    assert_equal [["retry", g.owner, 1, 1, "connection refused", 500]],
                 rows[1..].map { |e| e.values_at("event", "actor", "token", "attempt", "detail", "retry_after_ms") }
  end
end

class SqliteCrossLanguageTest < Minitest::Test
  include CrossLanguageCases

  def db_url
    @db_url ||= fresh_db_url
  end

  def fresh_db_url
    dir = Dir.mktmpdir("onceonly-rb-x")
    @cleanups << -> { FileUtils.rm_rf(dir) }
    "sqlite://#{dir}/ops.db"
  end
end

class PgCrossLanguageTest < Minitest::Test
  include CrossLanguageCases

  def db_url
    @db_url ||= pg_database_url
  end

  def fresh_db_url
    pg_database_url
  end
end

class MysqlCrossLanguageTest < Minitest::Test
  include CrossLanguageCases

  def db_url
    @db_url ||= mysql_database_url
  end

  def fresh_db_url
    mysql_database_url
  end
end
