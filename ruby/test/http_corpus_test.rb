# frozen_string_literal: true

require_relative "test_helper"
require_relative "support/raw_http"
require "onceonly/http"

# protocol/corpus/http_answers.json, the rule every client shares: each
# answer and each transport fault reproduced on a real socket, sent with
# Onceonly::HTTP.post, and each answer also classified from its status.
class HTTPCorpusTest < Minitest::Test
  CORPUS = JSON.parse(File.read(File.join(REPO_ROOT, "protocol/corpus/http_answers.json")))
  CLASSES = { "done" => :done, "not_sent" => :not_sent, "unknown" => :unknown, "permanent" => :permanent }.freeze
  RAISED = { not_sent: Onceonly::Effect::NotSent, unknown: Onceonly::Effect::Unknown,
             permanent: Onceonly::Effect::PermanentFailure }.freeze

  def post(url, timeout: 5)
    Onceonly::HTTP.post(url, body: '{"a":1}', idempotency_key: "mail:k-1", timeout: timeout)
  end

  def test_every_answer_gets_its_class_through_a_real_socket_and_from_its_status
    assert_operator CORPUS["send"].size, :>=, 20
    CORPUS["send"].each do |c|
      want = CLASSES.fetch(c["class"])
      server = RawHTTP.new(:answer, status: c["status"], headers: c["headers"], body: c["body"])
      got = post("http://127.0.0.1:#{server.port}/items")
      assert_equal [want, c["external_ref"]], [got.kind, got.external_ref], "#{c['name']}: #{got.reason}"
      assert_equal c["status"], got.status, c["name"]
      direct = Onceonly::HTTP.classify_send(c["status"], headers: c["headers"], body: c["body"])
      assert_equal [want, c["external_ref"]], [direct.kind, direct.external_ref], c["name"]
    ensure
      server&.close
    end
  end

  def test_every_transport_fault_gets_its_class_through_a_real_socket
    assert_equal %w[closed_after_write connect_refused connect_timeout dns_failure read_timeout reset_after_write tls_handshake],
                 CORPUS["transport"].map { |c| c["error"] }.sort
    CORPUS["transport"].each do |c|
      got, written = fault(c["error"])
      assert_equal CLASSES.fetch(c["class"]), got.kind, "#{c['name']}: #{got.reason}"
      # The premise of each case holds: the request was read in full exactly when the class says "after".
      assert_equal(c["class"] == "unknown" ? 1 : 0, written, c["name"])
    end
  end

  def fault(kind)
    case kind
    when "connect_refused"
      port = TCPServer.new("127.0.0.1", 0).then { |s| s.addr[1].tap { s.close } }
      [post("http://127.0.0.1:#{port}/items"), 0]
    when "connect_timeout" then full_accept_queue { |port| [post("http://127.0.0.1:#{port}/items", timeout: 0.5), 0] }
    when "dns_failure" then [post("http://onceonly-corpus.invalid/items"), 0]
    when "tls_handshake" then on(RawHTTP.new(:tls_handshake)) { |s| post("https://127.0.0.1:#{s.port}/items") }
    when "read_timeout" then on(RawHTTP.new(:read_timeout)) { |s| post("http://127.0.0.1:#{s.port}/items", timeout: 0.5) }
    else on(RawHTTP.new(kind.to_sym)) { |s| post("http://127.0.0.1:#{s.port}/items") }
    end
  end

  # A listening socket nobody accepts on, its queue (backlog 0) filled: a
  # further connect gets no answer to its SYN and times out.
  def full_accept_queue
    listener = Socket.new(:INET, :STREAM)
    listener.bind(Addrinfo.tcp("127.0.0.1", 0))
    listener.listen(0)
    port = listener.local_address.ip_port
    fillers = Array.new(3) do
      Socket.new(:INET, :STREAM).tap do |c|
        c.connect_nonblock(Addrinfo.tcp("127.0.0.1", port), exception: false)
      end
    end
    sleep 0.2 # the fillers' handshakes complete and fill the queue
    yield port
  ensure
    [*fillers, listener].compact.each(&:close)
  end

  def on(server)
    got = yield server
    [got, server.requests]
  ensure
    server.close
  end

  def test_a_send_raising_a_transport_error_is_classified_by_its_kind
    [Errno::ECONNREFUSED.new, SocketError.new("getaddrinfo"), Net::OpenTimeout.new, OpenSSL::SSL::SSLError.new].each do |e|
      assert_equal :not_sent, Onceonly::HTTP.classify_send(e).kind, e.class.name
    end
    [Net::ReadTimeout.new, Errno::ECONNRESET.new, EOFError.new, Errno::EPIPE.new, Net::WriteTimeout.new].each do |e|
      assert_equal :unknown, Onceonly::HTTP.classify_send(e).kind, e.class.name
    end
  end

  def test_effect_bang_reports_to_the_guard
    done = Onceonly::HTTP.classify_send(201, body: '{"id":"item-1"}').effect!
    assert_equal ["item-1", { "id" => "item-1" }], [done.external_ref, done.result]
    { 409 => :unknown, 422 => :permanent, 200 => :permanent }.each do |status, kind|
      assert_raises(RAISED.fetch(kind)) { Onceonly::HTTP.classify_send(status, body: "{}").effect! }
    end
    assert_raises(Onceonly::Effect::NotSent) { Onceonly::HTTP.classify_send(Errno::ECONNREFUSED.new).effect! }
  end

  def test_a_net_http_response_is_classified_and_bad_input_named
    server = RawHTTP.new(:answer, status: 201, body: '{"id":7}')
    response = Net::HTTP.post(URI("http://127.0.0.1:#{server.port}/items"), "{}")
    assert_equal [:done, "7"], Onceonly::HTTP.classify_send(response).then { |c| [c.kind, c.external_ref] }
    err = assert_raises(Onceonly::InvalidInput) { Onceonly::HTTP.classify_send("201") }
    assert_match(/takes a Net::HTTPResponse, a status or an exception, not String/, err.message)
    assert_raises(Onceonly::InvalidInput) { Onceonly::HTTP.post("ftp://x/items", body: "", idempotency_key: "a:b") }
  ensure
    server&.close
  end
end
