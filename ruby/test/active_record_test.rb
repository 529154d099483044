# frozen_string_literal: true

require_relative "test_helper"
require "onceonly/sidekiq"

begin
  require "active_record"
rescue LoadError
  nil
end

# A local effect through ActiveRecord (Debian's ruby-activerecord 6.1): the
# job's model writes, the claim and the completion in ActiveRecord's one
# transaction, on SQLite, PostgreSQL and MySQL/MariaDB.
class ActiveRecordTest < Minitest::Test
  include FreshStores

  if defined?(::ActiveRecord)
    class Receipt < ::ActiveRecord::Base; end

    class ArReceipt
      include Sidekiq::Job
      include Onceonly::Sidekiq.guard(key: 0, effect: :local, connection: :active_record)

      def perform(order_id, fail_after_write)
        Receipt.create!(order_id: order_id)
        raise "card declined" if fail_after_write

        { "receipts" => Receipt.where(order_id: order_id).count }
      end
    end
  end

  def setup
    super
    Support.unavailable!(self, "ActiveRecord (apt-get install ruby-activerecord)") unless defined?(::ActiveRecord)
  end

  def teardown
    ::ActiveRecord::Base.remove_connection if defined?(::ActiveRecord) && ::ActiveRecord::Base.connected?
    super
  end

  def exercise(store)
    Onceonly::Sidekiq.store = store
    ArReceipt.instance_variable_set(:@onceonly_guard, nil)
    ::ActiveRecord::Base.connection.create_table(:receipts, force: true) { |t| t.integer :order_id }
    assert_equal({ "receipts" => 1 }, ArReceipt.new.perform(1, false))
    assert_equal({ "receipts" => 1 }, ArReceipt.new.perform(1, false), "a repeat gets the stored result")
    err = assert_raises(Onceonly::LocalEffectFailed) { ArReceipt.new.perform(2, true) }
    assert_match(/card declined/, err.message)
    assert_equal [1], Receipt.pluck(:order_id), "the failed job's row rolled back with its claim"
    assert_equal "completed", store.op_get("ActiveRecordTest.ArReceipt", "1").record.state
    assert_nil store.op_get("ActiveRecordTest.ArReceipt", "2")
  end

  def test_sqlite
    store = sqlite_store
    ::ActiveRecord::Base.establish_connection(adapter: "sqlite3", database: store.path, timeout: 30_000)
    exercise(store)
  end

  def test_postgres
    store = pg_store
    ::ActiveRecord::Base.establish_connection(Support::PG_URL)
    ::ActiveRecord::Base.connection.execute(%(SET search_path TO "#{store.schema}"))
    exercise(store)
  end

  # ActiveRecord's mysql2 connection counts matched rows (FOUND_ROWS) and
  # makes its session strict; the claim runs in its transaction all the same.
  def test_mysql
    url = mysql_database_url
    store = Onceonly.connect(url)
    store.migrate
    options = Onceonly::MysqlStore.client_options(url)
    ::ActiveRecord::Base.establish_connection(adapter: "mysql2", **options.slice(:host, :port, :username, :password, :database))
    raw = ::ActiveRecord::Base.connection.raw_connection
    assert_kind_of Mysql2::Client, raw
    exercise(store)
    raw.query("UPDATE onceonly_ops SET state = state WHERE op_key = '1'")
    assert_equal 1, raw.affected_rows, "ActiveRecord's connection counts matched rows: the mode the store's own does not use"
  end
end
