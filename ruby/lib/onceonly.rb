# frozen_string_literal: true

require "json"
require "uri"
require "logger"

require "onceonly/version"
require "onceonly/errors"
require "onceonly/answer"
require "onceonly/keys"
require "onceonly/payload"
require "onceonly/record"
require "onceonly/spec"
require "onceonly/protocol"
require "onceonly/sql"
require "onceonly/owner"
require "onceonly/outcome"
require "onceonly/store"
require "onceonly/stores/reads"
require "onceonly/decide"
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
  # What an HTTP answer to a send means (loads net/http on first use).
  autoload :HTTP, "onceonly/http"

  class << self
    attr_writer :logger

    # Where onceonly logs (warnings by default; Sidekiq's logger under Sidekiq).
    def logger
      @logger ||= Logger.new($stderr, level: Logger::WARN, progname: "onceonly")
    end

    # The store a URL names: sqlite://PATH, sqlite:///ABS/PATH,
    # postgres(ql)://... (tables in the schema `schema`, default onceonly) or
    # mysql://... / mariadb://... (tables in the URL's database).
    def connect(url, **options)
      raise InvalidInput, "database URL must be a String, got #{url.inspect}" unless url.is_a?(String)

      if url.start_with?("sqlite:")
        require "onceonly/stores/sqlite"
        SqliteStore.new(url, **options)
      elsif url.start_with?("postgres://", "postgresql://")
        require "onceonly/stores/postgres"
        PgStore.new(url, **options)
      elsif url.start_with?("mysql://", "mariadb://")
        require "onceonly/stores/mysql"
        MysqlStore.new(url, **options)
      else
        raise InvalidInput, "database URL #{redact(url).inspect}: " \
                            "expected sqlite://PATH, sqlite:///ABS/PATH, postgres://... or mysql://..."
      end
    end

    # Creates or upgrades the tables of the store `url` names (idempotent, as
    # `onceonly --db URL migrate`); how many migrations it applied.
    def migrate(url, **options)
      connect(url, **options).migrate
    end

    SECRET_PARAMS = %w[password sslpassword passfile].freeze

    # The URL with every password replaced by ***, safe to print: the one of
    # user:pass@ (up to the last @) and the values of the query's password,
    # sslpassword and passfile; text that is no URL but holds @ or = is not
    # shown at all. The rule every client shares (protocol/corpus/db_urls.json).
    def redact(url)
      m = /\A([A-Za-z][A-Za-z0-9+.-]*):/.match(url)
      return url.match?(/[@=]/) ? "***" : url.dup unless m

      rest = m.post_match
      slashes = rest.start_with?("//") ? "//" : ""
      body = redact_query(rest[slashes.size..])
      at = body.rindex("@")
      colon = at && body[0...at].index(":")
      body = "#{body[0...colon]}:***#{body[at..]}" if colon
      "#{m[1]}:#{slashes}#{body}"
    end

    private

    def redact_query(body)
      before, sep, query = body.partition("?")
      return body if sep.empty?

      pairs = query.split("&", -1).map do |pair|
        name, eq, = pair.partition("=")
        secret = !eq.empty? && SECRET_PARAMS.include?(URI.decode_www_form_component(name).strip.downcase)
        secret ? "#{name}=***" : pair
      end
      "#{before}?#{pairs.join('&')}"
    rescue ArgumentError
      "#{before}?***"
    end

    public

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
