# frozen_string_literal: true

require_relative "test_helper"

# What MySQL/MariaDB does differently from the other databases, and how the
# store closes each trap (issue #23): affected rows with FOUND_ROWS and
# without, binary keys, strict mode, lock waits, statements prepared once.
class MysqlStoreTest < Minitest::Test
  include FreshStores

  def claim(store, key, owner: "w", conn: nil)
    store.op_claim(job_type: "t", op_key: key, fingerprint: "f", payload: nil, owner: owner, lease_ms: 30_000, conn: conn)
  end

  def enqueue(store, key)
    store.op_enqueue(job_type: "t", op_key: key, fingerprint: "f", payload: nil)
  end

  # A connection of the tests' own, as a user's would be.
  def user_connection(url, found_rows: false)
    options = Onceonly::MysqlStore.client_options(url)
    options[:flags] = Mysql2::Client::FOUND_ROWS if found_rows
    conn = Mysql2::Client.new(**options)
    @cleanups << -> { conn.close }
    conn
  end

  def test_k_capital_k_and_k_space_are_three_operations
    store = mysql_store
    ["k", "K", "k "].each { |key| assert_equal true, enqueue(store, key), key.inspect }
    assert_equal ["k", "K", "k "], ["k", "K", "k "].map { |key| store.op_get("t", key).record.op_key }
    assert_equal 3, store.op_list.size
    assert_equal :claimed, claim(store, "K").first
    assert_equal %w[queued claimed queued], ["k", "K", "k "].map { |key| store.op_get("t", key).record.state }
  end

  def test_a_key_longer_than_its_column_is_refused_never_cut
    store = mysql_store
    long = "x" * 513 # past the store's own check, straight to the database
    [-> { claim(store, long) }, -> { enqueue(store, long) }].each do |write|
      err = assert_raises(Onceonly::InvalidInput) { write.call }
      assert_match(/nothing written.*longer than its column/, err.message)
    end
    assert_empty store.op_list, "nothing written, not a cut key"
    assert_nil store.op_get("t", "x" * 512)
  end

  def test_the_stores_sessions_are_strict_and_utc
    store = mysql_store
    mode, zone = store.with_connection { |c| c.query("SELECT @@SESSION.sql_mode, @@SESSION.time_zone", as: :array).first }
    assert_includes mode.split(","), "STRICT_ALL_TABLES"
    assert_equal "+00:00", zone
    assert_includes store.open_connection.query("SELECT @@SESSION.sql_mode", as: :array).first.first, "STRICT_ALL_TABLES"
  end

  # The two client modes really differ: an UPDATE that matches a row and
  # changes nothing counts 1 with FOUND_ROWS and 0 without.
  def test_found_rows_and_changed_rows_differ_on_an_unchanging_update
    url = mysql_database_url
    Onceonly.migrate(url)
    counts = [false, true].map do |found_rows|
      conn = user_connection(url, found_rows: found_rows)
      conn.query("INSERT INTO onceonly_ops (job_type, op_key, state, fingerprint, created_at, updated_at) " \
                 "VALUES ('t', 'fr-#{found_rows}', 'queued', 'f', 0, 0)")
      conn.query("UPDATE onceonly_ops SET state = state WHERE op_key = 'fr-#{found_rows}'")
      conn.affected_rows
    end
    assert_equal [0, 1], counts
  end

  # With the session's clock stopped, a second heartbeat or cancel request
  # writes the same values as the first: only the version column makes it a
  # changed row, so it counts 1 in both modes (without it, 0 with mysql2's
  # default: the claim would look lost).
  def test_the_deciding_statements_count_the_same_with_found_rows_and_without
    [false, true].each do |found_rows|
      store = mysql_store(pool: 1, found_rows: found_rows)
      store.with_connection { |c| c.query("SET timestamp = 1900000000.123456") }
      mode = found_rows ? "FOUND_ROWS" : "changed rows"
      assert_equal true, enqueue(store, "q")
      kind, c = claim(store, "q")
      assert_equal [:claimed, 1], [kind, c.token], mode
      2.times do |i|
        beat = store.op_heartbeat(job_type: "t", op_key: "q", token: 1, lease_ms: 30_000)
        assert_equal 1_900_000_000_123 + 30_000, beat&.fetch(:lease_until), "heartbeat #{i + 1}, #{mode}"
      end
      2.times { |i| assert store.op_request_cancel(job_type: "t", op_key: "q", token: 1), "cancel request #{i + 1}, #{mode}" }
      assert_equal false, store.op_move(job_type: "t", op_key: "q", token: 1, from: "claimed", to: "completed",
                                        unless_cancel_requested: true), mode
      assert store.op_move(job_type: "t", op_key: "q", token: 1, from: "claimed", to: "cancelled"), mode
      assert_equal false, store.op_move(job_type: "t", op_key: "q", token: 1, from: "claimed", to: "cancelled"), mode
    end
  end

  def test_racing_claims_of_one_key_make_one_owner_in_both_modes
    [false, true].each do |found_rows|
      store = mysql_store(pool: 8, found_rows: found_rows)
      assert_equal true, enqueue(store, "queued-first")
      %w[queued-first new].each do |key|
        kinds = Array.new(8) { |i| Thread.new { claim(store, key, owner: "w#{i}").first } }.map(&:value)
        assert_equal 1, kinds.count(:claimed), "#{key}, found_rows #{found_rows}: #{kinds.inspect}"
        assert_equal 1, store.op_get("t", key).record.token
      end
    end
  end

  # A user's connection, in either mode, holds the claim, the effect and the
  # completion in one transaction, and keeps no prepared statement.
  def test_a_local_effect_on_the_users_connection_in_both_modes
    url = mysql_database_url
    store = Onceonly.connect(url)
    store.migrate
    spec = Onceonly::JobSpec.new(job_type: "t.local", effect: :local)
    g = Onceonly::Guard.new(store, spec)
    [false, true].each do |found_rows|
      conn = user_connection(url, found_rows: found_rows)
      conn.query("CREATE TABLE IF NOT EXISTS effects (op_key VARCHAR(64) NOT NULL) ENGINE = InnoDB")
      insert = lambda do |c, ctx|
        s = c.prepare("INSERT INTO effects (op_key) VALUES (?)")
        s.execute(ctx.op_key)
        s.close
        "inserted"
      end
      key = "k-#{found_rows}"
      assert_equal false, g.run_local(key, 1, conn: conn, &insert).repeat
      assert g.run_local(key, 1, conn: conn, &insert).repeat
      assert_raises(Onceonly::LocalEffectFailed) { g.run_local("#{key}-x", 1, conn: conn) { |c, ctx| insert.(c, ctx) && raise("boom") } }
      assert_equal [[key]], conn.query("SELECT op_key FROM effects WHERE op_key LIKE 'k-#{found_rows}%'", as: :array).to_a
      assert_nil store.op_get("t.local", "#{key}-x")
      prepared, closed = %w[Com_stmt_prepare Com_stmt_close].map do |v|
        Integer(conn.query("SHOW SESSION STATUS LIKE '#{v}'", as: :array).first.last)
      end
      assert_equal prepared, closed, "every statement prepared on the user's connection was closed"
    end
  end

  # Two deliveries of one queued local operation at once, each in its own
  # transaction: one acts, the other waits on the row's lock and finds it
  # done. Inserting first would leave each a shared lock to upgrade (1213).
  def test_two_local_claims_of_one_queued_key_at_once_do_not_deadlock
    url = mysql_database_url
    store = Onceonly.connect(url)
    store.migrate
    g = Onceonly::Guard.new(store, Onceonly::JobSpec.new(job_type: "t.local", effect: :local))
    payload = Onceonly.payload(1)
    %w[queued-first new].each do |key|
      if key == "queued-first"
        store.op_enqueue(job_type: "t.local", op_key: key, fingerprint: payload.fingerprint, payload: payload.json)
      end
      acted = Queue.new
      conns = Array.new(2) { user_connection(url) }
      outcomes = conns.map do |conn|
        Thread.new do
          g.run_local(key, 1, conn: conn) do
            acted << 1
            sleep 0.3 # hold the claim while the other delivery arrives
            "done"
          end
        end
      end.map(&:value)
      assert_equal 1, acted.size, "#{key}: one delivery acted"
      assert_equal [false, true], outcomes.map(&:repeat).sort_by { |r| r ? 1 : 0 }, "#{key}: #{outcomes.inspect}"
    end
  end

  def test_each_statement_is_prepared_once_per_pool_connection
    store = mysql_store(pool: 1)
    g = Onceonly::Guard.new(store, Onceonly::JobSpec.new(job_type: "hot.prepared", effect: :keyed))
    prepares = -> { Integer(store.with_connection { |c| c.query("SHOW SESSION STATUS LIKE 'Com_stmt_prepare'", as: :array).first.last }) }
    g.run("k0", 1) { "sent" }
    after_one = prepares.call
    10.times { |i| g.run("k#{i + 1}", 1) { "sent" } }
    assert_equal after_one, prepares.call, "no statement prepared again"
  end

  # A lock wait timeout (1205) on the store's own connection runs the work
  # again; in the user's transaction the error goes to the caller.
  def test_a_lock_wait_timeout_is_retried_on_the_stores_connections_only
    url = mysql_database_url
    store = Onceonly.connect(url, pool: 1)
    store.migrate
    store.with_connection { |c| c.query("SET SESSION innodb_lock_wait_timeout = 1") }
    assert_equal :claimed, claim(store, "locked").first
    holder = user_connection(url)
    holder.query("BEGIN")
    holder.query("SELECT token FROM onceonly_ops WHERE op_key = 'locked' FOR UPDATE")
    release = Thread.new do
      sleep 1.6
      holder.query("COMMIT")
    end
    moved = store.op_move(job_type: "t", op_key: "locked", token: 1, from: "claimed", to: "completed")
    release.join
    assert_equal true, moved
    assert_operator store.lock_retries, :>=, 1

    retries = store.lock_retries
    holder.query("BEGIN")
    holder.query("SELECT token FROM onceonly_ops WHERE op_key = 'locked' FOR UPDATE")
    user = user_connection(url)
    user.query("SET SESSION innodb_lock_wait_timeout = 1")
    err = assert_raises(Onceonly::DatabaseError) do
      store.transaction(user) { |c| store.op_move(job_type: "t", op_key: "locked", token: 1, from: "completed", to: "failed", conn: c) }
    end
    assert_match(/Lock wait timeout/, err.message)
    assert_equal retries, store.lock_retries, "not retried in the user's transaction"
  ensure
    holder&.query("ROLLBACK")
  end

  def test_urls_name_a_database_and_refuse_what_they_cannot_mean
    url = mysql_database_url
    assert_equal "mysql", Onceonly.connect(url.sub("mysql://", "mariadb://")).kind
    assert_match(/names no database/, assert_raises(Onceonly::InvalidInput) { Onceonly.connect(url.sub(%r{/[^/]*\z}, "/")) }.message)
    assert_match(/unknown parameter sslmode/, assert_raises(Onceonly::InvalidInput) { Onceonly.connect("#{url}?sslmode=x") }.message)
    err = assert_raises(Onceonly::DatabaseError) { Onceonly.connect("mysql://root:s3cret@127.0.0.1:1/x") }
    assert_match(/cannot connect to mysql:\/\/root:\*\*\*@127.0.0.1:1\/x/, err.message)
    refute_includes err.message, "s3cret"
  end
end
