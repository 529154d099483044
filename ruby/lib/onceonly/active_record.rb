# frozen_string_literal: true

require "active_record"
require "erb"
require "onceonly"

module Onceonly
  # onceonly on ActiveRecord's database: the store its configuration names,
  # and the tables as an ActiveRecord migration (docs/rails.md).
  #
  #   # db/migrate/20261203000000_create_onceonly_tables.rb
  #   require "onceonly/active_record"
  #   class CreateOnceonlyTables < Onceonly::ActiveRecord::Migration; end
  module ActiveRecord
    # onceonly's tables stay out of db/schema.rb: not the application's
    # models, and on SQLite they would be dumped without their bookkeeping.
    # After db:schema:load, call Onceonly::ActiveRecord.migrate.
    TABLES = /\Aonceonly_/
    ::ActiveRecord::SchemaDumper.ignore_tables |= [TABLES]

    # The adapters onceonly has a store for, by ActiveRecord's adapter name.
    ADAPTERS = { "postgresql" => "postgres", "postgis" => "postgres", "sqlite3" => "sqlite", "mysql2" => "mysql" }.freeze

    module_function

    # The onceonly URL of an ActiveRecord database configuration (default:
    # ActiveRecord::Base's): postgres://... or sqlite://PATH (a relative path
    # read from Rails.root under Rails, else the working directory, as
    # ActiveRecord reads it).
    def url_for(db_config = ::ActiveRecord::Base.connection_db_config)
      config = db_config.configuration_hash
      case kind_of_adapter(config[:adapter])
      when "postgres" then postgres_url(config)
      when "sqlite" then sqlite_url(config[:database].to_s)
      when "mysql" then mysql_url(config)
      end
    end

    # The store on ActiveRecord::Base's database (`schema`: PostgreSQL only,
    # default onceonly, the CLI's; MySQL: the tables in the database itself).
    def store(db_config = ::ActiveRecord::Base.connection_db_config, **options)
      options.delete(:schema) unless kind_of_adapter(db_config.configuration_hash[:adapter]) == "postgres"
      Onceonly.connect(url_for(db_config), **options)
    end

    # Creates or upgrades onceonly's tables on `connection` (an ActiveRecord
    # connection adapter), inside its transaction: the stores' own migration
    # files and bookkeeping, so `onceonly --db URL migrate` afterwards applies
    # nothing, and the reverse. Returns how many migrations it applied.
    def migrate(connection = ::ActiveRecord::Base.connection, schema: "onceonly")
      target = store(connection.pool.db_config, pool: 1, **(schema ? { schema: schema } : {}))
      # The store is only asked for its statements; they run on `connection`.
      # MySQL commits each DDL statement by itself: no transaction to join.
      return target.migrate_in(connection.raw_connection) if target.kind == "mysql"

      connection.transaction(requires_new: false) do
        connection.materialize_transactions # BEGIN now: the raw statements run inside it
        target.migrate_in(connection.raw_connection)
      end
    end

    def kind_of_adapter(adapter)
      ADAPTERS.fetch(adapter.to_s) do
        raise InvalidInput, "onceonly has no store for ActiveRecord's #{adapter.inspect} adapter yet; " \
                            "use postgresql, mysql2 or sqlite3"
      end
    end

    def postgres_url(config)
      user = config[:username] && ERB::Util.url_encode(config[:username].to_s)
      password = config[:password] && ERB::Util.url_encode(config[:password].to_s)
      auth = user ? "#{user}#{password ? ":#{password}" : ''}@" : ""
      host = config[:host].to_s
      host = "[#{host}]" if host.include?(":")
      port = config[:port] ? ":#{config[:port]}" : ""
      query = %i[sslmode sslrootcert sslcert sslkey].filter_map do |k|
        "#{k}=#{ERB::Util.url_encode(config[k].to_s)}" if config[k]
      end
      query << "host=#{ERB::Util.url_encode(host)}" if host.start_with?("/") # a socket directory
      host = "" if host.start_with?("/")
      "postgres://#{auth}#{host}#{port}/#{ERB::Util.url_encode(config[:database].to_s)}" \
        "#{query.empty? ? '' : "?#{query.join('&')}"}"
    end

    def mysql_url(config)
      encode = ->(v) { ERB::Util.url_encode(v.to_s) }
      auth = config[:username] ? "#{encode.(config[:username])}#{config[:password] ? ":#{encode.(config[:password])}" : ''}@" : ""
      query = { "socket" => config[:socket], "ssl-ca" => config[:sslca] }.compact.map { |k, v| "#{k}=#{encode.(v)}" }
      "mysql://#{auth}#{config[:host] || 'localhost'}#{config[:port] ? ":#{config[:port]}" : ''}/#{encode.(config[:database])}" \
        "#{query.empty? ? '' : "?#{query.join('&')}"}"
    end

    def sqlite_url(database)
      root = defined?(::Rails) && ::Rails.respond_to?(:root) && ::Rails.root ? ::Rails.root.to_s : Dir.pwd
      "sqlite://#{File.expand_path(database, root)}"
    end

    # The migration class to inherit from in db/migrate (nothing to write in
    # it): `up` creates the tables, `down` is refused, because going back
    # would delete the operation records and with them the promise.
    class Migration < ::ActiveRecord::Migration[6.1]
      def up
        Onceonly::ActiveRecord.migrate(connection)
      end

      def down
        raise ::ActiveRecord::IrreversibleMigration,
              "onceonly's tables hold the operation records; dropping them would let every operation run again"
      end
    end
  end
end
