# frozen_string_literal: true

require_relative "test_helper"
require "open3"

# A claim left by the Ruby client is taken over by the Python client, and the
# other way round, on the same records (python/, issue #12), on SQLite,
# PostgreSQL and MySQL/MariaDB. Python moves its store's clock, Ruby moves its own.
module PythonInteropCases
  include FreshStores

  PAYLOAD = { "to" => "a@example.com", "amount" => 19.99 }.freeze
  # The Python side: leave a claim (crash after claiming), or take one over.
  SCRIPT = <<~PY
    import json, sys
    import onceonly
    a = json.loads(sys.argv[1])
    store = onceonly.connect(a["db"], **({"schema": a["schema"]} if a.get("schema") else {}))
    store.clock_offset_ms = a["advance_ms"]
    spec = onceonly.JobSpec.build(a["job"], effect=a["effect"], on_stale=a.get("on_stale", "hold"), lease="10s", timeout="5s")
    crash = (lambda point: "crash" if point == "after_claim" else None) if a["mode"] == "leave" else None
    guard = onceonly.Guard(store, spec, owner=a["owner"], fault_hook=crash)
    sent = []
    def perform(ctx):
        sent.append(ctx.idempotency_key)
        return onceonly.Sent("py-item", {"by": "python"})
    try:
        out = guard.run(a["key"], onceonly.Payload.of(a["payload"]), perform)
        print(json.dumps({"outcome": type(out).__name__, "sent": sent}))
    except onceonly.InjectedCrash as e:
        print(json.dumps({"crashed": str(e), "sent": sent}))
  PY

  def python
    venv = File.join(REPO_ROOT, ".venv", "python", "bin", "python")
    File.executable?(venv) ? venv : "python3"
  end

  def py(mode, key, job:, effect: "keyed", advance_ms: 0, owner: "python-worker", **extra)
    args = { mode: mode, db: db_url, key: key, job: job, effect: effect, advance_ms: advance_ms, owner: owner,
             payload: PAYLOAD, schema: schema }.merge(extra)
    env = { "PYTHONPATH" => File.join(REPO_ROOT, "python") }
    out, err, status = Open3.capture3(env, python, "-c", SCRIPT, JSON.generate(args))
    assert status.success?, "python #{mode} failed:\n#{out}\n#{err}"
    JSON.parse(out.lines.last)
  end

  def guard(job, effect: :keyed, on_stale: nil, **opts)
    Onceonly::Guard.new(store, Onceonly::JobSpec.new(job_type: job, effect: effect, on_stale: on_stale, lease: 10, timeout: 5), **opts)
  end

  def test_a_claim_left_by_ruby_is_taken_over_by_python
    dying = guard("x.keyed", owner: "ruby-dead", fault_hook: ->(p, _) { raise Onceonly::InjectedCrash, p if p == :after_claim })
    assert_raises(Onceonly::InjectedCrash) { dying.run("order-1", PAYLOAD) { flunk } }
    assert_equal "InProgress", py("take", "order-1", job: "x.keyed")["outcome"], "a live claim is left alone"
    taken = py("take", "order-1", job: "x.keyed", advance_ms: 10_001)
    assert_equal({ "outcome" => "Done", "sent" => ["x.keyed:order-1"] }, taken)
    r = store.op_get("x.keyed", "order-1").record
    assert_equal ["completed", 2, "python-worker", "py-item", '{"by":"python"}'], [r.state, r.token, r.owner, r.external_ref, r.result]
    event = store.op_history("x.keyed", "order-1").last
    assert_equal ["take_over", "python-worker"], [event.event, event.actor]
    assert_match(/ruby-dead/, event.detail)
    assert guard("x.keyed").run("order-1", PAYLOAD) { flunk }.repeat, "Ruby gets Python's stored result"
  end

  def test_a_claim_left_by_python_is_taken_over_from_ruby_by_policy
    assert_match(/after_claim/, py("leave", "order-2", job: "x.hold", effect: "opaque", owner: "python-dead")["crashed"])
    assert_match(/after_claim/, py("leave", "order-3", job: "x.keyed", owner: "python-dead")["crashed"])
    store.advance_clock(10_001)
    held = guard("x.hold", effect: :opaque, on_stale: :hold).run("order-2", PAYLOAD) { flunk "hold acted" }
    assert_kind_of Onceonly::Outcome::Held, held
    assert_match(/claim by python-dead went past its lease/, held.reason)
    sent = []
    out = guard("x.keyed").run("order-3", PAYLOAD) { |ctx| sent << ctx.idempotency_key && "ruby did it" }
    assert_equal [false, ["x.keyed:order-3"]], [out.repeat, sent]
    r = store.op_get("x.keyed", "order-3").record
    assert_equal ["completed", 2, 2], [r.state, r.token, r.attempts]
    assert_equal "take_over", store.op_history("x.keyed", "order-3").last.event
  end
end

class SqlitePythonInteropTest < Minitest::Test
  include PythonInteropCases

  def store
    @store ||= sqlite_store
  end

  def db_url
    "sqlite://#{store.path}"
  end

  def schema
    nil
  end
end

class PgPythonInteropTest < Minitest::Test
  include PythonInteropCases

  def setup
    super
    _, _, ok = Open3.capture3(python, "-c", "import psycopg")
    Support.unavailable!(self, "psycopg for #{python} (the Python client's PostgreSQL driver)") unless ok.success?
  end

  def store
    @store ||= pg_store
  end

  def db_url
    Support::PG_URL
  end

  def schema
    store.schema
  end
end

# On MySQL/MariaDB: runs once python/ has its MySQL store (issue #23, the
# Python half); until then it skips, loudly, even under CI.
class MysqlPythonInteropTest < Minitest::Test
  include PythonInteropCases

  def setup
    super
    unless File.file?(File.join(REPO_ROOT, "python", "onceonly", "stores", "mysql.py"))
      warn "\n!!! SKIPPED #{name}: python/ has no MySQL store yet (python/onceonly/stores/mysql.py) !!!"
      skip("no Python MySQL store")
    end
    _, _, ok = Open3.capture3(python, "-c", "import pymysql")
    Support.unavailable!(self, "PyMySQL for #{python} (the Python client's MySQL driver)") unless ok.success?
  end

  def store
    @store ||= mysql_store
  end

  def db_url
    store.url
  end

  def schema
    nil
  end
end
