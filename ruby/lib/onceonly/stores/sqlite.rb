# frozen_string_literal: true

require "sqlite3"
require "connection_pool"

module Onceonly
  # A Store on one SQLite file, shared with the Rust store and CLI
  # (sqlite://PATH relative, sqlite:///ABS/PATH; created if missing).
  #
  # The statements are the Rust store's files. One rewrite is made, on
  # SQLite older than 3.42 only (Debian 12 ships 3.40, the Rust store
  # bundles a newer one): `unixepoch('subsec')` does not exist there (it
  # reads NULL), so the clock expression is read through `julianday('now')`,
  # the same wall clock to the millisecond, stable within a statement.
  class SqliteStore < Store
    CLOCK = "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
    CLOCK_BEFORE_3_42 = "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)"
    # The Rust store's bookkeeping (crates/onceonly-sqlite/src/in_tx.rs), which
    # has no .sql file of its own: the only SQL written here.
    MIGRATIONS_TABLE = "CREATE TABLE IF NOT EXISTS onceonly_migrations (\n" \
                       "             version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    MIGRATION_APPLIED = "SELECT version FROM onceonly_migrations WHERE version = ?1"
    MIGRATION_RECORD = "INSERT INTO onceonly_migrations (version, name, applied_at) VALUES (?1, ?2, datetime('now'))"
    BUSY_WAIT_S = 30

    attr_reader :path

    # Opens (creating if missing) the file `url` names; `pool` connections for
    # the store's own statements (one per thread that calls at once).
    def initialize(url, pool: 5)
      super(url)
      @path = self.class.path_of(url)
      @statements = {}
      @pool = ConnectionPool.new(size: pool, timeout: 60) { pool_connection }
      @pool.with { |_| nil } # create the file and set WAL now, so errors surface here
    end

    # The file path in a sqlite: URL, refusing in-memory databases.
    def self.path_of(url)
      rest = url.sub(/\Asqlite:(\/\/)?/, "").sub(/\?.*\z/, "")
      if rest.empty? || rest.include?(":memory:") || url.include?("mode=memory")
        raise InvalidInput, "#{Onceonly.redact(url).inspect} is not a SQLite file: onceonly needs a file " \
                            "that every worker process opens (sqlite://PATH or sqlite:///ABS/PATH)"
      end
      rest
    end

    # Creates an empty file at `path` with mode 0600 unless it exists. SQLite
    # would create it 0644 less the umask (any local user reads every
    # payload); it gives the -wal and -shm files it creates the database
    # file's mode. A file that exists keeps its mode: the operator chose it.
    def self.create_private(path)
      File.open(path, File::WRONLY | File::CREAT | File::EXCL, 0o600) { |f| f.chmod(0o600) }
    rescue Errno::EEXIST
      nil
    rescue SystemCallError => e
      raise DatabaseError, "cannot create SQLite database #{path}: #{e.message}"
    end

    # A new connection to the same file, configured as the store's own: for the
    # user's local effects when they have no connection of their own yet.
    def open_connection
      self.class.create_private(@path)
      db = SQLite3::Database.new(@path)
      self.class.wait_in_ruby(db)
      db.execute("PRAGMA journal_mode=WAL")
      db.execute("PRAGMA synchronous=NORMAL")
      db
    rescue SQLite3::Exception => e
      raise DatabaseError, "cannot open SQLite database #{@path}: #{e.message}"
    end

    # Makes `db` wait for a lock held by another connection in Ruby, up to
    # 30s: sleep releases the GVL, so the process's other threads run
    # meanwhile, the one holding the lock among them. SQLite's own busy
    # timeout (sqlite3-ruby's busy_timeout, ActiveRecord's `timeout:`) waits
    # holding the GVL: a thread of the process waiting for a lock that
    # another of its threads holds stops that thread too, until it gives up.
    def self.wait_in_ruby(db)
      db.busy_handler do |count|
        sleep([0.0002 * (2**[count, 7].min), 0.02].min)
        count < BUSY_WAIT_S * 50 + 7
      end
      db
    end

    # A connection of the store's own pool: its statements stay prepared.
    def pool_connection
      db = open_connection
      db.instance_variable_set(:@onceonly_statements, {})
      db
    end

    # Applies the migrations not yet recorded in onceonly_migrations, as the
    # Rust store does (BEGIN IMMEDIATE: two processes migrating at once apply
    # each migration once). Returns how many it applied.
    def migrate
      @pool.with do |db|
        applied = 0
        db.transaction(:immediate) { applied = migrate_in(db) }
        applied
      end
    rescue SQLite3::Exception => e
      raise DatabaseError, "migrating #{@path} failed: #{e.message}"
    end

    # As migrate, inside a transaction the caller holds on `db` (an
    # ActiveRecord migration's).
    def migrate_in(db)
      db.execute(MIGRATIONS_TABLE)
      SQL.migrations("sqlite").count do |m|
        next false if db.execute(MIGRATION_APPLIED, [m.version]).any?

        db.execute_batch(m.sql)
        db.execute(MIGRATION_RECORD, [m.version, m.name])
        raise DatabaseError, "recording migration #{m.version} inserted #{db.changes} rows" unless db.changes == 1

        true
      end
    end

    # Runs the block in a transaction on `conn` (the user's SQLite3::Database)
    # that takes the write lock at its start, so the claim never has to
    # upgrade a read lock (which could fail busy instead of waiting).
    def transaction(conn)
      result = nil
      conn.transaction(:immediate) { result = yield conn }
      result
    rescue SQLite3::Exception => e
      raise DatabaseError, "SQLite transaction on #{@path} failed: #{e.message}"
    end

    # How many connections the store's own pool holds.
    def pool_size
      @pool.size
    end

    def kind
      "sqlite"
    end

    private

    def with_conn(conn, &block)
      conn ? block.call(conn) : @pool.with(&block)
    rescue SQLite3::Exception => e
      raise NotMigrated.for("SQLite #{@path}", e.message) if e.message.start_with?("no such table: onceonly_")

      raise DatabaseError, "SQLite #{@path}: #{e.message}"
    end

    # Lists of one job type's queued rows or live claims read their partial
    # index, as the Rust store picks them.
    def list_query(job_type, state, lease_expired)
      if job_type && state == "queued" && !lease_expired then :list_queued
      elsif job_type && state == "claimed" then :list_claimed
      else :list
      end
    end

    def flag(value)
      value ? 1 : 0
    end

    def limit_arg(limit)
      limit || -1
    end

    def statement(name)
      @statements[name] ||= begin
        sql = SQL.query("sqlite", name.to_s)
        sql = sql.gsub(CLOCK, CLOCK_BEFORE_3_42) if self.class.old_sqlite?
        if sql.include?("unixepoch(") && self.class.old_sqlite?
          raise Error, "#{name}.sql reads the clock in a form this client does not rewrite for SQLite #{SQLite3::SQLITE_VERSION}"
        end
        sql.freeze
      end
    end

    def self.old_sqlite?
      (SQLite3::SQLITE_VERSION.split(".").map(&:to_i) <=> [3, 42, 0]).negative?
    end

    # SQLite stores a binary (ASCII-8BIT) Ruby string as a BLOB, which the
    # other clients cannot read as text: every string goes in as UTF-8.
    def text_params(params)
      params.map { |v| v.is_a?(String) && v.encoding != Encoding::UTF_8 ? v.dup.force_encoding(Encoding::UTF_8) : v }
    end

    def driver_rows(db, sql, params)
      with_statement(db, sql) do |stmt|
        columns = stmt.columns
        # A connection with results_as_hash (ActiveRecord's) yields hashes.
        stmt.execute(*text_params(params)).map do |values|
          values.is_a?(Hash) ? columns.to_h { |c| [c, values[c]] } : columns.zip(values).to_h
        end
      end
    end

    def driver_exec(db, sql, params)
      with_statement(db, sql) do |stmt|
        stmt.execute(*text_params(params)).to_a
        db.changes
      end
    end

    # The store's own connections keep their statements prepared; a user's
    # connection gets each one prepared and closed again.
    def with_statement(db, sql)
      cache = db.instance_variable_get(:@onceonly_statements)
      return yield(cache[sql] ||= db.prepare(sql)) if cache

      stmt = db.prepare(sql)
      begin
        yield stmt
      ensure
        stmt.close
      end
    end
  end
end
