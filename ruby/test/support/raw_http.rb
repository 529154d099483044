# frozen_string_literal: true

require "socket"

# A destination on a real socket that answers a send exactly as told: an
# HTTP answer written byte for byte, or a transport fault after reading the
# whole request (reset, close, silence), or a plain-text reply to a TLS
# client. `requests` counts the requests it read in full.
class RawHTTP
  attr_reader :port, :requests

  def initialize(mode, status: 200, headers: {}, body: "")
    @mode, @status, @headers, @body = mode, status, headers, body
    @server = TCPServer.new("127.0.0.1", 0)
    @port = @server.addr[1]
    @requests = 0
    @held = []
    @thread = Thread.new { serve }
  end

  def close
    @thread.kill
    (@held + [@server]).each { |s| s.close unless s.closed? }
  end

  private

  def serve
    loop do
      client = @server.accept
      if @mode == :tls_handshake
        client.write("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") # not TLS
        client.close
        next
      end
      read_request(client)
      @requests += 1
      case @mode
      when :answer then answer(client)
      when :reset_after_write
        client.setsockopt(Socket::SOL_SOCKET, Socket::SO_LINGER, [1, 0].pack("ii")) # close sends RST
        client.close
      when :closed_after_write then client.close
      when :read_timeout then @held << client # never answers
      end
    end
  end

  def read_request(client)
    head = +""
    head << client.readpartial(4096) until head.include?("\r\n\r\n")
    length = head[/^content-length:\s*(\d+)/i, 1].to_i
    rest = head.split("\r\n\r\n", 2)[1].to_s
    rest << client.readpartial(4096) while rest.bytesize < length
  end

  def answer(client)
    lines = ["HTTP/1.1 #{@status} Whatever"]
    @headers.each { |k, v| lines << "#{k}: #{v}" }
    lines << "Content-Length: #{@body.bytesize}" unless @status == 204
    lines << "Connection: close"
    client.write("#{lines.join("\r\n")}\r\n\r\n#{@status == 204 ? '' : @body}")
    client.close
  end
end
