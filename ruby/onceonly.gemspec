# frozen_string_literal: true

require_relative "lib/onceonly/version"

Gem::Specification.new do |s|
  s.name = "onceonly"
  s.version = Onceonly::VERSION
  s.summary = "Make a background job's side effect happen once per business operation (Sidekiq integration)"
  s.description = "The Ruby client of onceonly: the same operation records, SQL and protocol as the Rust core " \
                  "and CLI, on PostgreSQL, MySQL/MariaDB or SQLite, with a Sidekiq guard and a re-drive for stale claims."
  s.authors = ["onceonly"]
  s.license = "MIT"
  s.required_ruby_version = ">= 3.1"
  # The SQL is the Rust stores' files, copied by tools/sync-sql: shipped with the gem.
  s.files = Dir["lib/**/*.rb", "lib/onceonly/sql/**/*.sql", "bin/*", "examples/**/*.rb"]
  s.bindir = "bin"
  s.executables = %w[onceonly-replay onceonly-redrive]
  s.require_paths = ["lib"]
  # Only gems Debian ships as packages (ruby-pg, ruby-mysql2, ruby-sqlite3, ruby-connection-pool;
  # ruby-sidekiq and ruby-redis for the Sidekiq part).
  s.add_dependency "connection_pool", ">= 2.2"
  s.add_dependency "json", ">= 2.0"
  s.add_development_dependency "minitest", ">= 5.15"
  s.metadata["optional_dependencies"] = "pg >= 1.2 (PostgreSQL), mysql2 >= 0.5 (MySQL/MariaDB), sqlite3 >= 1.4 (SQLite), sidekiq >= 6.4 (Sidekiq)"
end
