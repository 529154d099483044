# frozen_string_literal: true

require "webrick"
require "json"

# The HTTP destination of docs/DESIGN.md section 6, in-process, for the
# cross-language tests: POST /items dedups on Idempotency-Key, GET
# /items?idempotency_key= looks up, DELETE /items/ID withdraws. `hang`
# makes POST wait (a worker killed while sending).
class Destination
  attr_reader :posts, :items
  attr_accessor :hang

  def initialize
    @posts = []
    @items = {}
    @lock = Mutex.new
    @hang = false
    @server = WEBrick::HTTPServer.new(BindAddress: "127.0.0.1", Port: 0, AccessLog: [],
                                      Logger: WEBrick::Log.new(File::NULL))
    @server.mount("/items", Servlet, self)
    @thread = Thread.new { @server.start }
  end

  def url
    "http://127.0.0.1:#{@server.config[:Port]}"
  end

  def stop
    @server.shutdown
    @thread.join(5)
  end

  # Hands every method to the destination (mount_proc would refuse DELETE).
  class Servlet < WEBrick::HTTPServlet::AbstractServlet
    def service(req, res)
      @options.first.handle(req, res)
    end
  end

  def handle(req, res)
    res["Content-Type"] = "application/json"
    case req.request_method
    when "POST"
      key = req["Idempotency-Key"]
      @lock.synchronize { @posts << [key, req.body] }
      sleep 0.05 while hang
      id = @lock.synchronize { @items[key] ||= "item-#{@items.size + 1}" }
      res.status = 201
      res.body = JSON.generate("id" => id)
    when "GET"
      id = @lock.synchronize { @items[req.query["idempotency_key"]] }
      res.status = id ? 200 : 404
      res.body = JSON.generate("id" => id)
    when "DELETE"
      @lock.synchronize { @items.delete_if { |_, v| v == req.path.split("/").last } }
      res.status = 204
    end
  end
end
