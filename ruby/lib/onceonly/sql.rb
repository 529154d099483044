# frozen_string_literal: true

module Onceonly
  # The statements and migrations, read from the copies of the Rust stores'
  # .sql files in lib/onceonly/sql/ (written by tools/sync-sql; never retyped).
  module SQL
    DIR = File.expand_path("sql", __dir__)
    Migration = Struct.new(:version, :name, :sql)

    module_function

    # The text of queries/<name>.sql of `store` ("sqlite" or "postgres").
    def query(store, name)
      path = File.join(DIR, store, "queries", "#{name}.sql")
      raise Error, "missing #{path}: run tools/sync-sql" unless File.file?(path)

      File.read(path, encoding: Encoding::UTF_8)
    end

    # The migrations of `store`, in order: 0001_ops.sql is version 1, named "ops".
    def migrations(store)
      Dir[File.join(DIR, store, "migrations", "*.sql")].sort.map do |path|
        number, name = File.basename(path, ".sql").split("_", 2)
        Migration.new(Integer(number, 10), name, File.read(path, encoding: Encoding::UTF_8))
      end
    end
  end
end
