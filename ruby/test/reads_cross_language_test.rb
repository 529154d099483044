# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/destination"
require_relative "support/raw_http"
require "open3"

# Records the Rust CLI wrote (a held operation, a claim left by a SIGKILLed
# relay, a completed one) read from Ruby with store.get / held / stuck /
# history: the same values the CLI's --json shows, on SQLite, PostgreSQL and MySQL.
module ReadsCrossLanguageCases
  include FreshStores

  PAYLOAD = '{"amount":19.99,"to":"a@example.com"}'
  # Keys that depend on when each side read its clock.
  CLOCK_KEYS = %w[age age_ms over_lease_ms now].freeze

  def cli(*args)
    out, err, status = Open3.capture3(Support.onceonly_bin, "--db", db_url, *args.map(&:to_s))
    assert status.success?, "onceonly #{args.join(' ')} failed (#{status}):\n#{out}\n#{err}"
    out
  end

  def cli_json(*args)
    cli(*args, "--json").lines.map { |l| JSON.parse(l) }
  end

  def without_clock(hashes)
    hashes.map { |h| h.reject { |k, _| CLOCK_KEYS.include?(k) } }
  end

  def test_ruby_reads_what_the_cli_wrote
    cli("migrate")
    store = Onceonly.connect(db_url)

    # Held: an opaque send answered 503 (unknown) is held at once by the relay.
    refusing = RawHTTP.new(:answer, status: 503, body: "busy")
    @cleanups << -> { refusing.close }
    cli("enqueue", "--job", "mail.opaque", "--key", "h-1", "--payload", PAYLOAD)
    cli("run", "--job", "mail.opaque", "--http", "http://127.0.0.1:#{refusing.port}", "--effect", "opaque",
        "--lease", "5s", "--timeout", "2s", "--drain")

    # Stuck: a relay SIGKILLed while sending leaves its claim.
    dest = Destination.new
    @cleanups << -> { dest.stop }
    dest.hang = true
    cli("enqueue", "--job", "mail.keyed", "--key", "s-1", "--payload", PAYLOAD)
    pid = spawn(Support.onceonly_bin, "--db", db_url, "run", "--job", "mail.keyed", "--http", dest.url,
                "--effect", "keyed", "--lease", "1s", "--timeout", "500ms", out: File::NULL, err: File::NULL)
    deadline = Time.now + 20
    sleep 0.05 until dest.posts.any? || Time.now > deadline
    Process.kill(:KILL, pid)
    Process.wait(pid)
    dest.hang = false
    sleep 1.1 # the CLI reads the database's real clock: the lease must really pass

    held = store.held
    assert_equal [%w[mail.opaque h-1 held]], held.map { |l| [l.record.job_type, l.record.op_key, l.record.state] }
    assert_equal without_clock(cli_json("held")), without_clock(held.map(&:to_h))

    stuck = store.stuck
    assert_equal [%w[mail.keyed s-1 claimed]], stuck.map { |l| [l.record.job_type, l.record.op_key, l.record.state] }
    assert_equal without_clock(cli_json("stuck")), without_clock(stuck.map(&:to_h))
    assert_equal 1_000, stuck.first.lease_ms
    assert_empty store.stuck(older_than: "1h")

    %w[mail.opaque:h-1 mail.keyed:s-1].each do |id|
      job, key = id.split(":")
      inspected = cli_json("inspect", "--job", job).find { |r| r["key"] == key }
      assert_equal inspected, Onceonly::Reads.record_hash(store.get(job, key)), id
      assert_equal cli_json("history", "--job", job, "--key", key), store.history(job, key).to_a, id
    end
    assert_includes store.history("mail.opaque", "h-1").events.map(&:event), "hold"
  end
end

class SqliteReadsCrossLanguageTest < Minitest::Test
  include ReadsCrossLanguageCases

  def db_url
    @db_url ||= begin
      dir = Dir.mktmpdir("onceonly-rb-x")
      @cleanups << -> { FileUtils.rm_rf(dir) }
      "sqlite://#{dir}/ops.db"
    end
  end
end

class PgReadsCrossLanguageTest < Minitest::Test
  include ReadsCrossLanguageCases

  def db_url
    @db_url ||= pg_database_url
  end
end

class MysqlReadsCrossLanguageTest < Minitest::Test
  include ReadsCrossLanguageCases

  def db_url
    @db_url ||= mysql_database_url
  end
end
