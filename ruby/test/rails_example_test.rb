# frozen_string_literal: true

require_relative "test_helper"
require "rbconfig"
require "open3"
require "timeout"

# ruby/examples/rails_shop as its README runs it: `rake db:migrate`, a real
# `sidekiq -r ./app.rb` process, `bin/place_orders`; on SQLite and on a
# PostgreSQL and a MySQL/MariaDB database of the test's own.
class RailsExampleTest < Minitest::Test
  include FreshStores

  EXAMPLE = File.expand_path("../examples/rails_shop", __dir__)
  REDIS = ENV.fetch("ONCEONLY_TEST_REDIS", "redis://127.0.0.1:6379/13")

  def setup
    super
    begin
      require "rails"
    rescue LoadError
      Support.unavailable!(self, "Rails (apt-get install ruby-rails)")
    end
    require "redis"
    Support.need_server!(self, "Redis at #{REDIS}") { Redis.new(url: REDIS).ping }
    @dir = Dir.mktmpdir("onceonly-rails-shop")
    @cleanups << -> { FileUtils.rm_rf(@dir) }
  end

  def env(db_url)
    { "SHOP_DATABASE_URL" => db_url, "REDIS_URL" => REDIS, "SHOP_LOG_LEVEL" => "warn",
      "RUBYLIB" => File.expand_path("../lib", __dir__) }
  end

  def run_in_example(env, *cmd)
    out, status = Open3.capture2e(env, *cmd, chdir: EXAMPLE)
    assert status.success?, "#{cmd.join(' ')} failed:\n#{out}"
    out
  end

  def place_orders(db_url)
    e = env(db_url)
    run_in_example(e, RbConfig.ruby, "-S", "rake", "db:migrate")
    log = File.join(@dir, "sidekiq.log")
    sidekiq = ENV.fetch("SIDEKIQ_BIN") { File.exist?("/usr/bin/sidekiq") ? "/usr/bin/sidekiq" : "sidekiq" }
    pid = Process.spawn(e, RbConfig.ruby, sidekiq, "-r", "./app.rb", "-q", "shop", "-c", "3", "-t", "15",
                        chdir: EXAMPLE, out: log, err: log)
    begin
      out = run_in_example(e, RbConfig.ruby, "bin/place_orders")
    ensure
      Process.kill("TERM", pid)
      Timeout.timeout(30) { Process.waitpid(pid) }
    end
    assert_match(/^order \d+: 3 deliveries, record completed \(token 1\), result \{"shipment":\d+\}$/, out)
    assert_match(/^order \d+: shipment rows 1$/, out)
    assert_match(/^rolled-back order: orders 0, record none$/, out)
    assert_match(/^shipped once$/, out)
  end

  def test_the_example_on_sqlite
    place_orders("sqlite3:#{File.join(@dir, 'shop.sqlite3')}")
  end

  def test_the_example_on_mysql
    place_orders(mysql_database_url(prefix: "rails_shop").sub(/\Amysql:/, "mysql2:"))
  end

  def test_the_example_on_postgres
    Support.need_postgres!(self)
    name = "rails_shop_#{SecureRandom.hex(4)}"
    Support.pg_admin(%(CREATE DATABASE "#{name}"))
    @cleanups << -> { Support.pg_admin(%(DROP DATABASE IF EXISTS "#{name}" WITH (FORCE))) }
    place_orders(Support::PG_URL.sub(%r{/[^/]*\z}, "/#{name}"))
  end
end
