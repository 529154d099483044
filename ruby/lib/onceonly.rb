# frozen_string_literal: true

require "json"
require "logger"

require "onceonly/version"
require "onceonly/errors"
require "onceonly/keys"
require "onceonly/payload"
require "onceonly/record"
require "onceonly/spec"
require "onceonly/protocol"
require "onceonly/sql"
require "onceonly/owner"
require "onceonly/outcome"
require "onceonly/store"
require "onceonly/guard/deadline"
require "onceonly/guard"
require "onceonly/guard/act"
require "onceonly/guard/local"

# onceonly makes a background job's side effect happen once per business
# operation, on the same records as the Rust core and CLI (docs/DESIGN.md).
#
#   store = Onceonly.connect("sqlite://onceonly.db")   # or postgres://...
#   store.migrate
#   spec  = Onceonly::JobSpec.new(job_type: "send_receipt", effect: :keyed, lease: "30s", timeout: "10s")
#   guard = Onceonly::Guard.new(store, spec)
#   outcome = guard.run("order-42", { "to" => "a@example.com" }) { |ctx| api.send(ctx) }
#
# Sidekiq: require "onceonly/sidekiq" (docs/sidekiq.md).
module Onceonly
  class << self
    attr_writer :logger

    # Where onceonly logs (warnings by default; Sidekiq's logger under Sidekiq).
    def logger
      @logger ||= Logger.new($stderr, level: Logger::WARN, progname: "onceonly")
    end

    # The store a URL names: sqlite://PATH, sqlite:///ABS/PATH or
    # postgres(ql)://... (tables in the schema `schema`, default onceonly).
    def connect(url, **options)
      raise InvalidInput, "database URL must be a String, got #{url.inspect}" unless url.is_a?(String)

      if url.start_with?("sqlite:")
        require "onceonly/stores/sqlite"
        SqliteStore.new(url, **options)
      elsif url.start_with?("postgres://", "postgresql://")
        require "onceonly/stores/postgres"
        PgStore.new(url, **options)
      else
        raise InvalidInput, "database URL #{redact(url).inspect}: " \
                            "expected sqlite://PATH, sqlite:///ABS/PATH or postgres://..."
      end
    end

    # The URL with any password replaced by ***, safe to print.
    def redact(url)
      url.sub(%r{(://[^:/@]+):[^@]*@}, '\1:***@')
    end

    # A Payload from a Payload (as is), nil (no payload) or a Ruby value.
    def payload(value)
      case value
      when Payload then value
      when nil then Payload.none
      else Payload.from_value(value)
      end
    end
  end
end
