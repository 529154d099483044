# frozen_string_literal: true

require_relative "test_helper"
require_relative "guard_cases"

class PgGuardTest < Minitest::Test
  include GuardCases

  def new_store
    pg_store
  end

  def create_effects_table(conn)
    conn.exec(%(CREATE TABLE "#{store.schema}".effects (op_key TEXT NOT NULL)))
  end

  def insert_effect(conn, key)
    conn.exec_params(%(INSERT INTO "#{store.schema}".effects (op_key) VALUES ($1)), [key])
    { "rows" => conn.exec(%(SELECT count(*) FROM "#{store.schema}".effects)).getvalue(0, 0).to_i }
  end

  def effects(conn)
    conn.exec(%(SELECT op_key FROM "#{store.schema}".effects ORDER BY op_key)).values
  end

  def test_schema_names_are_checked
    require "onceonly/stores/postgres"
    assert_match(/not an identifier/, assert_raises(Onceonly::InvalidInput) { Onceonly::PgStore.validate_schema!("a-b") }.message)
    assert_match(/pg_/, assert_raises(Onceonly::InvalidInput) { Onceonly::PgStore.validate_schema!("pg_x") }.message)
  end

  def test_the_schema_replaces_whole_identifiers_only
    require "onceonly/stores/postgres"
    assert_equal %(SELECT * FROM "billing".ops; CREATE SCHEMA IF NOT EXISTS "billing";),
                 Onceonly::PgStore.in_schema("SELECT * FROM onceonly.ops; CREATE SCHEMA IF NOT EXISTS onceonly;", "billing")
    assert_equal "SELECT onceonly_x, x_onceonly", Onceonly::PgStore.in_schema("SELECT onceonly_x, x_onceonly", "b")
  end
end
