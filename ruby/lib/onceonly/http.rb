# frozen_string_literal: true

require "json"
require "net/http"
require "openssl"
require "socket"
require "uri"

module Onceonly
  # What an HTTP destination's answer to a send means (docs/DESIGN.md
  # section 6; the rule is protocol/corpus/http_answers.json, run by every
  # client's suite): done, not sent, unknown or permanent failure.
  #
  #   answer = Onceonly::HTTP.post("https://api.example/items", body: json,
  #                                idempotency_key: onceonly.idempotency_key)
  #   answer.effect!   # an Onceonly::Done, or raises Effect::NotSent / Unknown / PermanentFailure
  #
  # With a client of your own: `Onceonly::HTTP.classify_send(response)` (a
  # Net::HTTPResponse, or a status with `headers:` and `body:`), and
  # `classify_send(error)` for the exception a send raised.
  module HTTP
    # Transport errors raised before any byte of the request was written:
    # the connection (or its TLS handshake) never came up.
    NOT_SENT_ERRORS = [Errno::ECONNREFUSED, Errno::EHOSTUNREACH, Errno::ENETUNREACH, Errno::EADDRNOTAVAIL,
                       SocketError, Net::OpenTimeout, OpenSSL::SSL::SSLError].freeze

    # One classified answer: `kind` is :done, :not_sent, :unknown or
    # :permanent; `external_ref` the destination's id (done only); `status`
    # the HTTP status (nil for a transport error); `reason` a sentence.
    Classified = Struct.new(:kind, :external_ref, :status, :reason, keyword_init: true) do
      def done? = kind == :done

      # The effect's report to the guard: an Onceonly::Done (the id as the
      # external reference and `{"id" => id}` as the result), or the
      # exception that says how it went.
      def effect!
        case kind
        when :done then Onceonly::Done.new(external_ref: external_ref, result: { "id" => external_ref })
        when :not_sent then raise Effect::NotSent, reason
        when :unknown then raise Effect::Unknown, reason
        else raise Effect::PermanentFailure, reason
        end
      end
    end

    module_function

    # Classifies an answer: a Net::HTTPResponse, or an Integer status with
    # its `body:`; or an Exception a send raised (by its class: a connection
    # that never came up is not sent, anything later may have reached the
    # destination). `headers:` is accepted and changes nothing: no header,
    # Retry-After included, changes the class (when to retry is the guard's
    # backoff and Sidekiq's retry).
    def classify_send(answer, headers: nil, body: nil) # rubocop:disable Lint/UnusedMethodArgument
      case answer
      when Exception then classify_error(answer)
      when Net::HTTPResponse then classify_status(answer.code.to_i, answer.body)
      when Integer then classify_status(answer, body)
      else raise InvalidInput, "classify_send takes a Net::HTTPResponse, a status or an exception, not #{answer.class}"
      end
    end

    # `POST url` with `Idempotency-Key` and the body, classified. The
    # connection is opened first, so any failure before the request is
    # written is not sent, whatever its kind; `timeout` (seconds) bounds the
    # connect and the answer each; `ca_file` adds a PEM certificate authority.
    def post(url, body:, idempotency_key:, timeout: 10, headers: {}, ca_file: nil)
      uri = URI(url)
      raise InvalidInput, "#{url.inspect} is not an http:// or https:// URL" unless uri.is_a?(URI::HTTP) && uri.host

      http = Net::HTTP.new(uri.host, uri.port)
      http.use_ssl = uri.scheme == "https"
      http.ca_file = ca_file if ca_file
      http.open_timeout = http.read_timeout = http.write_timeout = timeout
      http.max_retries = 0 # a POST is never sent twice by the client
      begin
        http.start
      rescue StandardError => e
        return Classified.new(kind: :not_sent, reason: "connection failed before sending: #{e.class}: #{e.message}")
      end
      begin
        request = Net::HTTP::Post.new(uri.request_uri, { "Content-Type" => "application/json" }.merge(headers))
        request["Idempotency-Key"] = idempotency_key
        request.body = body
        classify_send(http.request(request))
      rescue StandardError => e
        Classified.new(kind: :unknown, reason: "after the request was written: #{e.class}: #{e.message}")
      ensure
        http.finish if http.started?
      end
    end

    def classify_status(status, body)
      case status
      when 200..299
        ref = id_of(body)
        return Classified.new(kind: :done, external_ref: ref, status: status, reason: "answered #{status}") if ref

        Classified.new(kind: :permanent, status: status,
                       reason: "the destination answered #{status} without an id: it breaks the protocol (body: #{snippet(body)})")
      when 408, 409, 429, 500..599
        Classified.new(kind: :unknown, status: status, reason: "the destination answered #{status}: #{snippet(body)}")
      when 400..499
        Classified.new(kind: :permanent, status: status, reason: "the destination refused with #{status}: #{snippet(body)}")
      else
        Classified.new(kind: :permanent, status: status, reason: "the destination answered #{status}, which the protocol does not allow")
      end
    end

    def classify_error(error)
      if NOT_SENT_ERRORS.any? { |k| error.is_a?(k) }
        Classified.new(kind: :not_sent, reason: "connection failed before sending: #{error.class}: #{error.message}")
      else
        Classified.new(kind: :unknown, reason: "transport error after sending: #{error.class}: #{error.message}")
      end
    end

    # The JSON body's "id": a non-empty string, or a number as its decimal
    # text (as the Rust and Python destinations read it); else nil.
    def id_of(body)
      value = JSON.parse(body.to_s.empty? ? "null" : body)
      ref = value.is_a?(Hash) ? value["id"] : nil
      case ref
      when String then ref.empty? ? nil : ref
      when Numeric then ref.to_s
      end
    rescue JSON::ParserError
      nil
    end

    def snippet(body)
      text = body.to_s
      text.empty? ? "(empty)" : text[0, 200].inspect
    end

    private_class_method :classify_status, :classify_error, :id_of, :snippet
  end
end
