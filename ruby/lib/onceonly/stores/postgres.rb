# frozen_string_literal: true

require "pg"
require "connection_pool"

module Onceonly
  # A Store on PostgreSQL, in a schema of its own (`onceonly` by default, the
  # one the Rust CLI uses): <schema>.ops, <schema>.audit, <schema>.migrations.
  # The statements are the Rust store's files; the schema is put in place of
  # `onceonly` exactly as the Rust store does (whole identifiers only).
  class PgStore < Store
    FILE_SCHEMA = "onceonly"
    MAX_SCHEMA_BYTES = 63

    attr_reader :schema

    def initialize(url, schema: FILE_SCHEMA, pool: 5)
      super(url)
      @schema = self.class.validate_schema!(schema)
      @conninfo = url
      @statements = {}
      @pool = ConnectionPool.new(size: pool, timeout: 60) { pool_connection }
      @pool.with { |_| nil } # connect now, so a bad URL surfaces here
    end

    # A schema name: [a-z_][a-z0-9_]*, at most 63 bytes, not pg_*.
    def self.validate_schema!(schema)
      unless schema.is_a?(String) && schema.match?(/\A[a-z_][a-z0-9_]*\z/)
        raise InvalidInput, "schema #{schema.inspect} is not an identifier; use [a-z_][a-z0-9_]*"
      end
      if schema.bytesize > MAX_SCHEMA_BYTES
        raise InvalidInput, "schema #{schema.inspect} is #{schema.bytesize} bytes, the limit is #{MAX_SCHEMA_BYTES}"
      end
      raise InvalidInput, "schema #{schema.inspect} starts with pg_, which PostgreSQL reserves" if schema.start_with?("pg_")

      schema
    end

    # `sql` with every whole `onceonly` identifier replaced by `schema`, quoted
    # (crates/onceonly-postgres/src/queries.rs in_schema).
    def self.in_schema(sql, schema)
      sql.gsub(/(?<![A-Za-z0-9_"$])#{FILE_SCHEMA}(?![A-Za-z0-9_"$])/) { %("#{schema}") }
    end

    # The advisory lock key migrate holds: FNV-1a of "onceonly.migrate:" and
    # the schema, as a signed 64-bit integer (the Rust store's key).
    def self.migrate_lock_key(schema)
      hash = 0xcbf29ce484222325
      "onceonly.migrate:#{schema}".each_byte do |byte|
        hash ^= byte
        hash = (hash * 0x100000001b3) & 0xffffffffffffffff
      end
      hash >= 2**63 ? hash - 2**64 : hash
    end

    # A new connection to the same database (for a user's local effects).
    def open_connection
      conn = PG.connect(@conninfo)
      conn.exec("SET client_min_messages TO warning")
      conn
    rescue PG::Error => e
      raise DatabaseError, "cannot connect to #{redacted}: #{e.message.strip}"
    end

    # A connection of the store's own pool: it prepares each statement the
    # first time it runs it, and reuses it after (a user's connection runs
    # them unprepared, so nothing is left on it).
    def pool_connection
      conn = open_connection
      conn.instance_variable_set(:@onceonly_prepared, {})
      conn
    end

    # Creates or upgrades the tables in one transaction under the Rust
    # store's advisory lock and bookkeeping (<schema>.migrations). Returns how
    # many migrations it applied.
    def migrate
      @pool.with do |conn|
        applied = 0
        conn.transaction { applied = migrate_in(conn) }
        applied
      end
    rescue PG::Error => e
      raise DatabaseError, "migrating #{redacted} failed: #{e.message.strip}"
    end

    # As migrate, inside a transaction the caller holds on `conn` (an
    # ActiveRecord migration's): the advisory lock is held to its end, so
    # two processes migrating at once apply each migration once.
    def migrate_in(conn)
      conn.exec_params(statement(:migrate_lock), [self.class.migrate_lock_key(@schema)])
      conn.exec(statement(:migrate_setup))
      SQL.migrations("postgres").count do |m|
        next false if conn.exec_params(statement(:migrate_applied), [m.version]).ntuples.positive?

        conn.exec(self.class.in_schema(m.sql, @schema))
        recorded = conn.exec_params(statement(:migrate_record), [m.version, m.name]).cmd_tuples
        raise DatabaseError, "recording migration #{m.version} inserted #{recorded} rows" unless recorded == 1

        true
      end
    end

    # Runs the block in a transaction on `conn` (the user's PG::Connection).
    def transaction(conn, &block)
      result = nil
      conn.transaction { result = block.call(conn) }
      result
    rescue PG::Error => e
      raise DatabaseError, "PostgreSQL transaction failed: #{e.message.strip}"
    end

    # How many connections the store's own pool holds.
    def pool_size
      @pool.size
    end

    def kind
      "postgres"
    end

    private

    def redacted
      Onceonly.redact(@conninfo)
    end

    def with_conn(conn, &block)
      conn ? block.call(conn) : @pool.with(&block)
    rescue PG::UndefinedTable, PG::InvalidSchemaName => e
      # Only our own relations mean "not migrated"; a user's missing table stays a DatabaseError.
      raise NotMigrated.for("PostgreSQL #{redacted}", e.message.lines.first.strip) if e.message.match?(/"#{@schema}[."]/)

      raise DatabaseError, "PostgreSQL #{redacted}: #{e.message.strip}"
    rescue PG::Error => e
      raise DatabaseError, "PostgreSQL #{redacted}: #{e.message.strip}"
    end

    def flag(value)
      value ? true : false
    end

    def limit_arg(limit)
      limit
    end

    # Typed int8: operator_held.sql does not use $1, so PostgreSQL cannot infer it.
    def clock_param(ms)
      { value: ms.to_s, type: 20 }
    end

    def statement(name)
      @statements[name] ||= self.class.in_schema(SQL.query("postgres", name.to_s), @schema).freeze
    end

    def driver_rows(conn, sql, params)
      result = run_statement(conn, sql, params)
      result.map do |row|
        row["cancel_requested"] = row["cancel_requested"] == "t" if row.key?("cancel_requested")
        row
      end
    end

    def driver_exec(conn, sql, params)
      run_statement(conn, sql, params).cmd_tuples
    end

    # Prepared once per pool connection (parse and plan once, not per job);
    # the statement's text names it, so each schema's copy is its own.
    def run_statement(conn, sql, params)
      prepared = conn.instance_variable_get(:@onceonly_prepared)
      return conn.exec_params(sql, params) unless prepared

      name = prepared[sql] ||= "onceonly_#{prepared.size}".tap { |n| conn.prepare(n, sql, param_types(params)) }
      conn.exec_prepared(name, params)
    end

    # The types a statement is prepared with: those its caller gave (a $N the
    # SQL never uses cannot be inferred: clock_param), the rest left to
    # PostgreSQL (0).
    def param_types(params)
      params.map { |p| p.is_a?(Hash) ? p.fetch(:type, 0) : 0 }
    end
  end
end
