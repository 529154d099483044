# frozen_string_literal: true

require_relative "test_helper"
require_relative "guard_cases"

class SqliteGuardTest < Minitest::Test
  include GuardCases

  def new_store
    sqlite_store
  end

  def create_effects_table(db)
    db.execute("CREATE TABLE effects (op_key TEXT NOT NULL)")
  end

  def insert_effect(db, key)
    db.execute("INSERT INTO effects (op_key) VALUES (?)", [key])
    { "rows" => db.get_first_value("SELECT count(*) FROM effects") }
  end

  def effects(db)
    db.execute("SELECT op_key FROM effects ORDER BY op_key")
  end

  def test_the_clock_is_read_from_sqlite_to_the_millisecond
    before = (Time.now.to_f * 1000).floor
    now = store.now
    after = (Time.now.to_f * 1000).ceil
    assert_operator now, :>=, before - 1
    assert_operator now, :<=, after + 1
    store.advance_clock(5000)
    assert_operator store.now - now, :>=, 5000
  end

  def test_in_memory_databases_are_refused
    assert_match(/not a SQLite file/, assert_raises(Onceonly::InvalidInput) { Onceonly.connect("sqlite::memory:") }.message)
  end
end
