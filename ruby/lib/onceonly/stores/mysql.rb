# frozen_string_literal: true

require "mysql2"
require "connection_pool"

module Onceonly
  # A Store on MySQL or MariaDB (mysql://USER[:PASS]@HOST[:PORT]/DATABASE, or
  # mariadb://), in the URL's database: onceonly_ops, onceonly_audit,
  # onceonly_migrations, the tables the Rust store and CLI use. Tested on
  # MariaDB 10.11 with Debian's ruby-mysql2.
  #
  # The statements are the Rust store's files (crates/onceonly-mysql), run as
  # that store runs them (its src/lib.rs says why each differs from
  # PostgreSQL):
  #
  # - Affected rows: mysql2 counts the rows an UPDATE *changed*, unless the
  #   client sets FOUND_ROWS (ActiveRecord does), which counts the rows it
  #   *matched*. Every statement that decides who acts writes a new version
  #   whenever it matches, so both counts are the same; the store's own
  #   connections take either (`found_rows:`).
  # - No UPDATE ... RETURNING: a claim reads the clock, inserts the record
  #   claimed (1: ours, token 1); on a duplicate key it reads the record and
  #   claims it fenced on the token read (1: ours, token + 1). In the user's
  #   transaction a record that exists is locked first (get_locked.sql). A
  #   take-over and a heartbeat read their row back in the transaction that
  #   wrote it.
  # - Strict mode: each connection of the store adds STRICT_ALL_TABLES to its
  #   sql_mode and checks it, so a value too long for its column is refused
  #   (InvalidInput), never cut; its time_zone is +00:00.
  # - Deadlock (1213) and lock wait timeout (1205): work on the store's own
  #   connections runs again from its first statement, at most MAX_ATTEMPTS
  #   times; in the user's transaction the error goes to the caller.
  #
  # MySQL binds `?` by position, so each file has its own order; BINDS maps
  # the arguments the Store passes (the clock offset first, as
  # PostgreSQL's $1..$N) to it, and loading a statement checks that the file
  # has as many `?` as its mapping gives.
  class MysqlStore < Store
    DUP_ENTRY = 1062
    DATA_TOO_LONG = 1406
    NO_SUCH_TABLE = 1146
    # Deadlock (the server rolled the transaction back), lock wait timeout.
    TRANSIENT = [1213, 1205].freeze
    # Attempts at most of work that met a TRANSIENT error, the first included.
    MAX_ATTEMPTS = 5
    # MySQL has no LIMIT ALL.
    NO_LIMIT = 2**63 - 1
    # How long migrate waits for another process's migration, in seconds.
    MIGRATE_WAIT_S = 60
    OUR_TABLE_MISSING = /\.onceonly_(ops|audit|migrations)' doesn't exist/.freeze
    SCHEMES = %w[mysql mariadb].freeze
    URL_PARAMS = %w[socket ssl-mode ssl-ca].freeze

    BINDS = {
      now: ->(off) { [off] },
      get: ->(off, jt, key) { [off, jt, key] },
      get_latest: ->(off, jt, key) { [off, jt, key] },
      get_locked: ->(off, jt, key) { [off, jt, key] },
      record: ->(jt, key) { [jt, key] },
      claim_insert: ->(*binds) { binds },
      claim_update: ->(*binds) { binds },
      move: lambda { |off, jt, key, token, from, to, ext, res, err, unless_cancel, retry_ms|
        [off, to, ext, res, err, retry_ms, jt, key, token, from, unless_cancel]
      },
      request_cancel: ->(off, jt, key, token) { [off, jt, key, token] },
      heartbeat: ->(off, jt, key, token, lease_ms) { [off, lease_ms, jt, key, token] },
      heartbeat_read: ->(jt, key, token) { [jt, key, token] },
      take_over: lambda { |off, jt, key, stale, to, owner, lease_ms, reason|
        [off, to, owner, lease_ms, reason, jt, key, stale]
      },
      take_over_read: ->(jt, key, token) { [jt, key, token] },
      list: ->(off, jt, state, expired, limit) { [off, jt, jt, state, state, expired, limit] },
      enqueue: ->(off, jt, key, fp, payload, delay_ms) { [jt, key, fp, payload, delay_ms, off] },
      audit: lambda { |off, jt, key, event, actor, token, from, to, detail, attempt, retry_ms|
        [jt, key, event, actor, token, from, to, detail, attempt, retry_ms, off]
      },
      history: ->(jt, key) { [jt, key] },
      operator_held: ->(_off, jt, limit, offset) { [jt, jt, limit, offset] },
      operator_stuck: ->(off, jt, limit, offset) { [off, jt, jt, limit, offset] },
      migrate_lock: ->(wait_s) { [wait_s] },
      migrate_setup: -> { [] },
      migrate_unlock: -> { [] },
      migrate_applied: ->(version) { [version] },
      migrate_record: ->(version, name) { [version, name] },
      session_strict: -> { [] },
      session_sql_mode: -> { [] },
      session_time_zone: -> { [] }
    }.freeze

    # One statement: its file's text and the mapping to its binds.
    Statement = Struct.new(:name, :sql, :binds)
    # One claim's values, its clock read once.
    ClaimArgs = Struct.new(:job_type, :op_key, :fingerprint, :owner, :now, :lease_until)

    attr_reader :database

    # Connects to the database `url` names (it must name one), with `pool`
    # connections for the store's own statements. `found_rows: true` makes
    # them count matched rather than changed rows (ActiveRecord's setting;
    # the store decides the same either way).
    def initialize(url, pool: 5, found_rows: false)
      super(url)
      @options = self.class.client_options(url)
      @options[:flags] = Mysql2::Client::FOUND_ROWS if found_rows
      @database = @options.fetch(:database)
      @statements = {}
      @retries = 0
      @retries_mutex = Mutex.new
      @pool = ConnectionPool.new(size: pool, timeout: 60) { pool_connection }
      @pool.with { |_| nil } # connect now, so a bad URL or a lax sql_mode surfaces here
    end

    # The mysql2 options for `url`, refusing one that names no database.
    def self.client_options(url)
      shown = Onceonly.redact(url).inspect
      uri = begin
        URI.parse(url)
      rescue URI::InvalidURIError => e
        raise InvalidInput, "#{shown} is not a MySQL URL: #{e.message}"
      end
      raise InvalidInput, "#{shown} is not a MySQL URL (mysql:// or mariadb://)" unless SCHEMES.include?(uri.scheme)

      database = uri.path.to_s.delete_prefix("/")
      if database.empty?
        raise InvalidInput, "#{shown} names no database: onceonly keeps its tables in the URL's database " \
                            "(mysql://user@host:3306/DATABASE)"
      end
      params = URI.decode_www_form(uri.query.to_s).to_h
      unknown = params.keys - URL_PARAMS
      raise InvalidInput, "#{shown}: unknown parameter #{unknown.join(', ')} (known: #{URL_PARAMS.join(', ')})" if unknown.any?

      unescape = ->(s) { s && URI.decode_www_form_component(s) }
      { host: uri.host.to_s.empty? ? "localhost" : uri.host, port: uri.port || 3306,
        username: unescape.call(uri.user), password: unescape.call(uri.password),
        database: unescape.call(database), encoding: "utf8mb4", reconnect: false,
        socket: params["socket"], sslca: params["ssl-ca"],
        ssl_mode: params["ssl-mode"]&.downcase&.tr("-", "_")&.to_sym }.compact
    end

    # A new connection to the same database, configured as the store's own
    # (strict sql_mode, time_zone +00:00): for a user's local effects.
    def open_connection
      conn = Mysql2::Client.new(**@options)
      session(conn)
      conn
    rescue Mysql2::Error => e
      conn&.close
      raise DatabaseError, "cannot connect to #{redacted}: #{e.message}"
    end

    # A connection of the store's own pool: it prepares each statement the
    # first time it runs it and reuses it after (a user's connection gets
    # each one prepared and closed again, so nothing is left on it).
    def pool_connection
      conn = open_connection
      conn.instance_variable_set(:@onceonly_statements, {})
      conn
    end

    # Creates or upgrades the tables under the Rust store's named lock and
    # bookkeeping (onceonly_migrations); DDL commits at once in MySQL, so
    # each migration is idempotent on its own. How many it applied.
    def migrate
      @pool.with do |conn|
        got = driver_rows(conn, statement(:migrate_lock), [MIGRATE_WAIT_S]).first&.fetch("got")
        raise DatabaseError, "another process held the migration lock of #{redacted} for #{MIGRATE_WAIT_S}s" unless got == 1

        begin
          conn.query(statement(:migrate_setup).sql)
          SQL.migrations("mysql").count do |m|
            next false if driver_rows(conn, statement(:migrate_applied), [m.version]).any?

            conn.query(m.sql)
            driver_exec(conn, statement(:migrate_record), [m.version, m.name])
            true
          end
        ensure
          driver_rows(conn, statement(:migrate_unlock), [])
        end
      end
    rescue Mysql2::Error => e
      raise DatabaseError, "migrating #{redacted} failed: #{e.message}"
    end

    # Runs the block in a transaction on `conn` (the user's Mysql2::Client):
    # committed when the block returns, rolled back when it raises.
    def transaction(conn)
      conn.query("BEGIN")
      result = yield conn
      conn.query("COMMIT")
      result
    rescue Mysql2::Error => e
      rollback(conn)
      raise DatabaseError, "MySQL transaction on #{redacted} failed: #{e.message}"
    rescue Exception # rubocop:disable Lint/RescueException -- roll back whatever stopped the block, then re-raise
      rollback(conn)
      raise
    end

    # Claims as the Rust store does (crates/onceonly-mysql/src/claim.rs).
    def op_claim(job_type:, op_key:, fingerprint:, payload:, owner:, lease_ms:, conn: nil)
      with_conn(conn) do |c|
        claim_on(c, [job_type, op_key, fingerprint, payload, owner, lease_ms], in_tx: !conn.nil?)
      end
    end

    def op_take_over(job_type:, op_key:, stale_token:, to:, owner:, lease_ms:, reason:)
      with_conn(nil) do |c|
        own_transaction(c) do
          n = exec(c, :take_over, [job_type, op_key, stale_token, to, owner, lease_ms, reason])
          next nil if n.zero?
          raise DatabaseError, "take-over of #{job_type}:#{op_key} affected #{n} rows" unless n == 1

          row = rows(c, :take_over_read, [job_type, op_key, stale_token + 1], clock: false).first
          raise DatabaseError, "take-over of #{job_type}:#{op_key}: row gone" unless row

          Claim.from_row(row)
        end
      end
    end

    def op_heartbeat(job_type:, op_key:, token:, lease_ms:)
      with_conn(nil) do |c|
        own_transaction(c) do
          n = exec(c, :heartbeat, [job_type, op_key, token, lease_ms])
          next nil if n.zero?
          raise DatabaseError, "heartbeat of #{job_type}:#{op_key} affected #{n} rows" unless n == 1

          row = rows(c, :heartbeat_read, [job_type, op_key, token], clock: false).first
          row && { lease_until: row["lease_until"], cancel_requested: row["cancel_requested"] == 1 }
        end
      end
    end

    # A duplicate key (1062) means the record exists: it is read and returned.
    def op_enqueue(job_type:, op_key:, fingerprint:, payload:, delay_ms: 0, conn: nil)
      with_conn(conn) do |c|
        n = begin
          exec(c, :enqueue, [job_type, op_key, fingerprint, payload, delay_ms])
        rescue Mysql2::Error => e
          raise unless e.error_number == DUP_ENTRY

          nil
        end
        next true if n == 1
        raise DatabaseError, "enqueue of #{job_type}:#{op_key} affected #{n} rows" if n

        get_on(c, job_type, op_key, read: conn ? :get_latest : :get)&.record or raise NotFound, "#{job_type}:#{op_key} is gone"
      end
    end

    # Appends one audit event; raises unless it inserted one row.
    def op_audit(**event)
      n = super
      raise DatabaseError, "audit append for #{event[:job_type]}:#{event[:op_key]} inserted #{n} rows" unless n == 1

      n
    end

    # How many times work was run again after a deadlock or a lock wait timeout.
    def lock_retries
      @retries_mutex.synchronize { @retries }
    end

    # How many connections the store's own pool holds.
    def pool_size
      @pool.size
    end

    def kind
      "mysql"
    end

    private

    def redacted
      Onceonly.redact(url)
    end

    # Strict mode, checked, and UTC: the session every statement of the store assumes.
    def session(conn)
      driver_exec(conn, statement(:session_strict), [])
      driver_exec(conn, statement(:session_time_zone), [])
      mode = driver_rows(conn, statement(:session_sql_mode), []).first.fetch("sql_mode")
      return if mode.split(",").include?("STRICT_ALL_TABLES")

      raise InvalidInput, "#{redacted}: the session's sql_mode #{mode.inspect} lacks STRICT_ALL_TABLES after " \
                          "setting it; too-long keys would be cut"
    end

    # `in_tx`: the user's transaction. There a record a plain read finds is
    # locked (get_locked.sql) before anything is written, and a missing one
    # is inserted: both orders that keep two claims of one key from
    # deadlocking (see get_locked.sql).
    def claim_on(conn, args, in_tx:)
      job_type, op_key, fingerprint, payload, owner, lease_ms = args
      now = rows(conn, :now, []).first.fetch("now")
      claim = ClaimArgs.new(job_type, op_key, fingerprint, owner, now, now + lease_ms)
      if in_tx && get_on(conn, job_type, op_key)
        locked = get_on(conn, job_type, op_key, read: :get_locked)
        return claim_existing(conn, claim, locked, in_tx: true) if locked
      end
      inserted = begin
        exec(conn, :claim_insert, [job_type, op_key, owner, fingerprint, payload, now, claim.lease_until, now, now],
             clock: false)
      rescue Mysql2::Error => e
        raise unless e.error_number == DUP_ENTRY

        nil
      end
      return [:claimed, Claim.new(token: 1, attempts: 1, claimed_at: now, lease_until: claim.lease_until)] if inserted == 1
      raise DatabaseError, "claim insert of #{job_type}:#{op_key} affected #{inserted} rows" if inserted

      claim_existing(conn, claim, get_on(conn, job_type, op_key, read: in_tx ? :get_latest : :get), in_tx: in_tx)
    end

    # The claim of a record that exists (`snap`, as read): by an update
    # fenced on the token read, only when it looked claimable.
    def claim_existing(conn, claim, snap, in_tx:)
      gone = "#{claim.job_type}:#{claim.op_key} conflicted on claim but is gone (purged meanwhile?)"
      raise NotFound, gone unless snap
      # Not claimable as read: no update, so no exclusive lock (in the user's
      # transaction, racing workers would each upgrade a shared lock: 1213).
      return [:existing, snap] unless claimable?(snap.record, claim.fingerprint, claim.now)

      r = snap.record
      n = exec(conn, :claim_update, [claim.owner, claim.now, claim.lease_until, claim.now, claim.job_type,
                                     claim.op_key, r.token, claim.fingerprint, claim.now], clock: false)
      case n
      when 1
        [:claimed, Claim.new(token: r.token + 1, attempts: r.attempts + 1, claimed_at: claim.now,
                             lease_until: claim.lease_until)]
      when 0
        # Claimable when read, moved by someone else before the update.
        again = get_on(conn, claim.job_type, claim.op_key, read: in_tx ? :get_latest : :get)
        raise NotFound, gone unless again

        [:existing, again]
      else raise DatabaseError, "claim update of #{claim.job_type}:#{claim.op_key} affected #{n} rows"
      end
    end

    # The update's own condition, repeated only to skip an update that would
    # match nothing (the update re-checks it and decides).
    def claimable?(record, fingerprint, now)
      record.state == "queued" && record.fingerprint == fingerprint && (record.due_at.nil? || record.due_at <= now)
    end

    # `read`: :get; :get_latest, a shared-lock read of the newest committed
    # row whatever snapshot the user's REPEATABLE READ transaction holds; or
    # :get_locked, the same with an exclusive lock.
    def get_on(conn, job_type, op_key, read: :get)
      row = rows(conn, read, [job_type, op_key]).first
      row && Snapshot.new(Record.from_row(row), row["now"])
    end

    # Work on the store's own connection (conn nil) that meets a deadlock or
    # a lock wait timeout runs again from its first statement; errors become
    # Onceonly's.
    def with_conn(conn, &block)
      attempt = 1
      begin
        conn ? block.call(conn) : @pool.with(&block)
      rescue Mysql2::Error => e
        raise mapped(e) unless conn.nil? && TRANSIENT.include?(e.error_number) && attempt < MAX_ATTEMPTS

        @retries_mutex.synchronize { @retries += 1 }
        sleep(0.005 * attempt)
        attempt += 1
        retry
      end
    end

    def mapped(error)
      case error.error_number
      when DATA_TOO_LONG
        InvalidInput.new("refused by MySQL, nothing written: #{error.message} (the value is longer than its column)")
      when NO_SUCH_TABLE
        # Only our own tables mean "not migrated"; a user's missing table stays a DatabaseError.
        return NotMigrated.for("MySQL #{redacted}", error.message) if error.message.match?(OUR_TABLE_MISSING)

        DatabaseError.new("MySQL #{redacted}: #{error.message}")
      else DatabaseError.new("MySQL #{redacted}: #{error.message}")
      end
    end

    # A transaction on a connection of the store's pool; rolled back when
    # the block raises (a lock wait timeout leaves the transaction open).
    def own_transaction(conn)
      conn.query("BEGIN")
      result = yield
      conn.query("COMMIT")
      result
    rescue Exception # rubocop:disable Lint/RescueException -- never hand back a connection inside a transaction
      rollback(conn)
      raise
    end

    def rollback(conn)
      conn.query("ROLLBACK")
    rescue Mysql2::Error
      nil
    end

    def flag(value)
      value ? 1 : 0
    end

    def limit_arg(limit)
      limit || NO_LIMIT
    end

    def statement(name)
      @statements[name] ||= begin
        sql = SQL.query("mysql", name.to_s).freeze
        binds = BINDS.fetch(name) { raise Error, "#{name}.sql has no bind order in MysqlStore::BINDS" }
        self.class.check_binds!(name, sql, binds)
        Statement.new(name, sql, binds)
      end
    end

    # The file's `?` (outside -- comments) must be as many as its mapping gives.
    def self.check_binds!(name, sql, binds)
      marks = sql.lines.sum { |l| l.sub(/--.*/, "").count("?") }
      given = binds.arity.negative? ? marks : binds.call(*Array.new(binds.arity)).size
      return if marks == given

      raise Error, "#{name}.sql has #{marks} binds, MysqlStore::BINDS gives #{given}"
    end

    def driver_rows(conn, stmt, params)
      with_statement(conn, stmt) do |prepared|
        result = prepared.execute(*stmt.binds.call(*params), as: :hash, symbolize_keys: false, cast_booleans: false)
        result ? result.to_a : []
      end
    end

    def driver_exec(conn, stmt, params)
      with_statement(conn, stmt) do |prepared|
        prepared.execute(*stmt.binds.call(*params))&.to_a
        prepared.affected_rows
      end
    end

    # The store's own connections keep their statements prepared; a user's
    # connection gets each one prepared and closed again.
    def with_statement(conn, stmt)
      cache = conn.instance_variable_get(:@onceonly_statements)
      return yield(cache[stmt.name] ||= conn.prepare(stmt.sql)) if cache

      prepared = conn.prepare(stmt.sql)
      begin
        yield prepared
      ensure
        prepared.close
      end
    end
  end
end
