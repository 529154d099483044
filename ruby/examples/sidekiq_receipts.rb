# frozen_string_literal: true

# A runnable example: two guarded Sidekiq jobs on one SQLite file.
#
#   ruby -Iruby/lib ruby/examples/sidekiq_receipts.rb demo   # starts Sidekiq, pushes, prints, stops
#
# or by hand, in two shells:
#   ONCEONLY_DB=sqlite:///tmp/receipts.db REDIS_URL=redis://127.0.0.1:6379/10 \
#     sidekiq -r ./ruby/examples/sidekiq_receipts.rb
#   ONCEONLY_DB=sqlite:///tmp/receipts.db REDIS_URL=redis://127.0.0.1:6379/10 \
#     ruby -Iruby/lib ruby/examples/sidekiq_receipts.rb push 42

$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "onceonly/sidekiq"

ENV["ONCEONLY_DB"] ||= "sqlite:///tmp/onceonly-receipts.db"
ENV["REDIS_URL"] ||= "redis://127.0.0.1:6379/10"
Onceonly::Sidekiq.store = Onceonly.connect(ENV["ONCEONLY_DB"])

# A local effect: the receipt row commits in the same transaction as the
# claim and its completion, so it exists exactly once per order.
class RecordReceipt
  include Sidekiq::Job
  include Onceonly::Sidekiq.guard(key: ->(order_id, _amount) { "order-#{order_id}" }, effect: :local)

  def perform(order_id, amount)
    onceonly.conn.execute("INSERT INTO receipts (order_id, amount) VALUES (?, ?)", [order_id, amount])
    { "receipt_for" => order_id }
  end
end

# A keyed effect: the mail API dedups on the idempotency key, which stays the
# same on every attempt (here the "API" is a log line).
class MailReceipt
  include Sidekiq::Job
  include Onceonly::Sidekiq.guard(key: 0, effect: :keyed, lease: "30s", timeout: "10s")

  def perform(order_id)
    Sidekiq.logger.info("mail API called with Idempotency-Key #{onceonly.idempotency_key}")
    Onceonly::Done.new(external_ref: "mail-#{order_id}", result: { "sent" => true })
  end
end

Sidekiq.configure_server do |config|
  # Pushes jobs of stale claims again every 30s (one process per interval acts).
  Onceonly::Sidekiq::Redrive.every(30)
  config.on(:startup) do
    Onceonly::Sidekiq.store.migrate
    Onceonly::Sidekiq.store.with_connection do |db|
      db.execute("CREATE TABLE IF NOT EXISTS receipts (order_id INTEGER NOT NULL, amount REAL NOT NULL)")
    end
  end
end

def push(order_id)
  # The same order pushed three times: one receipt row, one mail.
  3.times do
    RecordReceipt.perform_async(order_id, 19.99)
    MailReceipt.perform_async(order_id.to_s)
  end
end

def demo
  require "rbconfig"
  require "sidekiq/api"
  store = Onceonly::Sidekiq.store
  store.migrate
  store.with_connection { |db| db.execute("CREATE TABLE IF NOT EXISTS receipts (order_id INTEGER NOT NULL, amount REAL NOT NULL)") }
  pid = Process.spawn(RbConfig.ruby, File.exist?("/usr/bin/sidekiq") ? "/usr/bin/sidekiq" : "sidekiq", "-r", File.expand_path(__FILE__), "-c", "2",
                      out: File::NULL, err: File::NULL)
  order = Process.pid
  push(order)
  sleep 0.2 until Sidekiq::Queue.new.size.zero? && Sidekiq::Workers.new.size.zero? &&
                  store.op_list(state: "completed").count { |r| r.op_key.end_with?(order.to_s) } == 2
  rows = store.with_connection { |db| db.get_first_value("SELECT count(*) FROM receipts WHERE order_id = ?", [order]) }
  puts "order #{order}: pushed 3 times each; #{rows} receipt row(s)"
  store.op_list.select { |r| r.op_key.end_with?(order.to_s) }.each do |r|
    puts "  #{r.job_type} #{r.op_key}: #{r.state}, attempts #{r.attempts}, result #{r.result}"
  end
ensure
  if pid
    Process.kill(:TERM, pid)
    Process.wait(pid)
  end
end

if $PROGRAM_NAME == __FILE__
  case ARGV[0]
  when "demo" then demo
  when "push" then push(Integer(ARGV.fetch(1)))
  else abort "usage: #{$PROGRAM_NAME} demo | push ORDER_ID"
  end
end
