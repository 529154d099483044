# frozen_string_literal: true

require_relative "test_helper"
require_relative "guard_cases"

# The guard's transitions on MySQL/MariaDB, with the store's own
# connections counting changed rows (mysql2's default) ...
class MysqlGuardTest < Minitest::Test
  include GuardCases

  def new_store
    mysql_store
  end

  def create_effects_table(conn)
    conn.query("CREATE TABLE effects (op_key VARCHAR(512) NOT NULL) ENGINE = InnoDB")
  end

  def insert_effect(conn, key)
    stmt = conn.prepare("INSERT INTO effects (op_key) VALUES (?)")
    stmt.execute(key)
    stmt.close
    { "rows" => conn.query("SELECT count(*) AS n FROM effects", as: :hash).first["n"] }
  end

  def effects(conn)
    conn.query("SELECT op_key FROM effects ORDER BY op_key", as: :array).to_a
  end

  def test_the_clock_is_read_from_the_database_to_the_millisecond
    before = (Time.now.to_f * 1000).floor
    now = store.now
    after = (Time.now.to_f * 1000).ceil
    assert_operator now, :>=, before - 1
    assert_operator now, :<=, after + 1
    store.advance_clock(5000)
    assert_operator store.now - now, :>=, 5000
  end
end

# ... and matched rows (FOUND_ROWS, as ActiveRecord's connections do).
class MysqlFoundRowsGuardTest < MysqlGuardTest
  def new_store
    mysql_store(found_rows: true)
  end
end
