# frozen_string_literal: true

# The ActiveJob application of rails_sidekiq_test.rb: `sidekiq -r` loads this
# file (RAILS_TEST_DB set: it connects at once), and so does the test
# process (it connects per test). Guarded ActiveJob jobs on the Sidekiq
# adapter, ActiveRecord on the store's database:
#
# - RailsApp::Ship (local): a Shipment row, the claim and the completion in
#   ActiveRecord's one transaction. A file pause-<order> in RAILS_TEST_DIR
#   makes it stop after the row is written and before the commit (it writes
#   written-<order> and sleeps, for a SIGKILL); the file is taken first, so
#   the redelivery does not stop.
# - RailsApp::Notify (keyed): its effect is a line in effects.log; a file
#   pause-notify-<order> stops it after the claim and before the effect.
#
# Every guarded perform appends "class key outcome pid" to outcomes.log.
$LOAD_PATH.unshift File.expand_path("../../lib", __dir__)
require "fileutils"
require "onceonly/sidekiq"
require "onceonly/active_job"

module RailsApp
  class Shipment < ::ActiveRecord::Base
    self.table_name = "shipments"
  end

  class Order < ::ActiveRecord::Base
    self.table_name = "orders"
    # The enqueue Rails 6.1 has instead of enqueue_after_transaction_commit.
    after_create_commit { Ship.perform_later(id) }
  end

  module_function

  def dir
    ENV.fetch("RAILS_TEST_DIR")
  end

  # Takes the pause file `name`: true when it was there (this run stops).
  def take_pause(name)
    File.delete(File.join(dir, name))
    true
  rescue Errno::ENOENT
    false
  end

  def stop_here(name)
    File.write(File.join(dir, "written-#{name}.tmp"), Process.pid.to_s)
    File.rename(File.join(dir, "written-#{name}.tmp"), File.join(dir, "written-#{name}"))
    sleep
  end

  def append(file, line)
    File.open(File.join(dir, file), "a") { |f| f.write("#{line}\n") }
  end

  # ActiveRecord on `db_url` (postgres://..., mysql2://... or sqlite3:PATH), the store
  # on the same database (Onceonly::ActiveJob's default), jobs on `queue`.
  def connect!(db_url, queue:)
    # MySQL: the session's clock zone UTC, as the store's own connections
    # (docs/rails.md); ActiveRecord 6.1 leaves the server's.
    config = db_url.start_with?("mysql2:") ? { url: db_url, variables: { time_zone: "+00:00" } } : db_url
    ::ActiveRecord::Base.establish_connection(config)
    Onceonly::ActiveJob.store = nil
    [Ship, Notify].each do |k|
      k.instance_variable_set(:@onceonly_guard, nil)
      k.queue_name = queue
    end
  end

  # The application's tables: onceonly's by the migration, and its own.
  def create_tables!
    Onceonly::ActiveRecord.migrate
    conn = ::ActiveRecord::Base.connection
    conn.create_table(:orders, force: true) { |t| t.string :email }
    conn.create_table(:shipments, force: true) do |t|
      t.integer :order_id, null: false
      t.integer :pid, null: false
    end
  end

  class Ship < ::ActiveJob::Base
    include Onceonly::ActiveJob
    guarded key: ->(order_id) { "order-#{order_id}" }, effect: :local,
            lease: ENV.fetch("RAILS_TEST_LEASE", "3s"), timeout: "2s"

    def perform(order_id)
      Shipment.create!(order_id: order_id, pid: Process.pid)
      RailsApp.stop_here(order_id) if RailsApp.take_pause("pause-#{order_id}")
      { "order" => order_id, "rows" => Shipment.where(order_id: order_id).count }
    end
  end

  class Notify < ::ActiveJob::Base
    include Onceonly::ActiveJob
    guarded key: ->(order_id) { "notify-#{order_id}" }, effect: :keyed,
            lease: ENV.fetch("RAILS_TEST_LEASE", "3s"), timeout: "2s"

    def perform(order_id)
      RailsApp.stop_here("notify-#{order_id}") if RailsApp.take_pause("pause-notify-#{order_id}")
      RailsApp.append("effects.log", "#{onceonly.idempotency_key} #{Process.pid}")
      { "notified" => order_id }
    end
  end
end

::ActiveJob::Base.queue_adapter = :sidekiq
::ActiveJob::Base.logger = Logger.new($stdout, level: ENV.fetch("RAILS_TEST_LOG", "info"))
::ActiveRecord::Base.logger = nil
Onceonly::ActiveJob.on_outcome = lambda do |klass, key, outcome|
  next unless klass.name.start_with?("RailsApp::") # another suite's jobs, in the test process

  RailsApp.append("outcomes.log", "#{klass.name} #{key} #{outcome.class.name.split('::').last} #{Process.pid}")
end
Sidekiq.configure_client { |c| c.redis = { url: ENV.fetch("ONCEONLY_TEST_REDIS", "redis://127.0.0.1:6379/13") } }
Sidekiq.configure_server do |c|
  c.redis = { url: ENV.fetch("ONCEONLY_TEST_REDIS", "redis://127.0.0.1:6379/13") }
  Onceonly::Sidekiq::Redrive.every(Float(ENV["RAILS_TEST_REDRIVE"])) if ENV["RAILS_TEST_REDRIVE"]
end

RailsApp.connect!(ENV["RAILS_TEST_DB"], queue: ENV.fetch("RAILS_TEST_QUEUE")) if ENV["RAILS_TEST_DB"]
