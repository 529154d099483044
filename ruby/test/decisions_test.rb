# frozen_string_literal: true

require_relative "test_helper"

# protocol/decisions.json (written from the Rust core's step machine,
# crates/onceonly/src/protocol/decide.rs; docs/protocol.md): every case run
# against Onceonly::Decide step by step, and the cases the shell can
# reproduce run through the real Guard with a store, an effect, a fault hook,
# a cancel flag and a sleep that answer from the transcript.
class DecisionsTest < Minitest::Test
  FILE = File.join(REPO_ROOT, "protocol", "decisions.json")
  DATA = JSON.parse(File.read(FILE))
  CASES = DATA.fetch("cases")
  DELIVERY = DATA.fetch("delivery")

  # A case's job as the machine takes it.
  def self.job(data)
    Onceonly::Decide::Job.new(effect: data.fetch("effect").to_sym, on_stale: data.fetch("on_stale")&.to_sym,
                              max_retries: data.fetch("max_retries"), lease_ms: data.fetch("lease_ms"),
                              timeout_ms: data.fetch("timeout_ms"))
  end

  def self.decider(kase)
    entry = kase.fetch("entry")
    job = job(kase.fetch("job"))
    case entry.fetch("entry")
    when "run" then Onceonly::Decide::Decider.new(job, :run, entry.fetch("fingerprint"))
    when "local" then Onceonly::Decide::Decider.new(job, :local, entry.fetch("fingerprint"))
    when "run_claimed" then Onceonly::Decide::Decider.new(job, :run_claimed, claim: entry.fetch("claim"))
    when "release_unstarted"
      Onceonly::Decide::Decider.new(job, :release_unstarted, claim: entry.fetch("claim"), reason: entry.fetch("reason"))
    else raise ArgumentError, "an entry this client does not know: #{entry.inspect}"
    end
  end

  # nil when the machine takes the case's steps exactly, else why not: the
  # case, the step's number, and both steps.
  def self.replay(kase)
    decider = decider(kase)
    answer = nil
    kase.fetch("steps").each_with_index do |recorded, i|
      step = decider.next(answer)
      unless step == recorded.fetch("step")
        return "#{kase['name']}: step #{i + 1} differs\n  recorded: #{JSON.generate(recorded['step'])}\n" \
               "  machine:  #{JSON.generate(step)}"
      end
      answer = recorded["answer"]
    end
    "#{kase['name']}: the recorded steps ended, the machine did not" unless decider.ended?
  rescue StandardError => e
    "#{kase['name']}: the machine cannot run it: #{e.class}: #{e.message}"
  end

  def test_the_file_is_a_version_this_client_reads
    assert_equal 1, DATA.fetch("version")
    assert_equal DATA.fetch("count"), CASES.size
    assert_equal CASES.size, CASES.map { |c| c["name"] }.uniq.size, "case names are unique"
  end

  # The moves and events the cases name are the ones this client's shell
  # runs (Protocol::OWNER_MOVES) and appends (transitions.json's audit events).
  def test_the_cases_name_known_moves_and_events
    steps = CASES.flat_map { |c| c["steps"].map { |s| s["step"] } }
    events = JSON.parse(File.read(File.join(REPO_ROOT, "protocol", "transitions.json")))["audit_events"].map { |e| e["name"] }
    assert_empty steps.select { |s| s["do"] == "move" }.map { |s| s["move"] }.uniq - Onceonly::Protocol::OWNER_MOVES.keys
    assert_empty steps.select { |s| s["do"] == "audit" }.map { |s| s["event"] }.uniq - events
    assert_equal %w[audit cancel_requested claim error fault finish lookup move perform read sleep take_over withdraw],
                 steps.map { |s| s["do"] }.uniq.sort, "the step kinds this client runs"
  end

  def test_every_case_machine_direct
    failures = CASES.filter_map { |kase| self.class.replay(kase) }
    puts "\ndecisions: #{CASES.size} cases"
    assert failures.empty?, "#{failures.size} of #{CASES.size} cases differ; the first:\n#{failures.first(5).join("\n")}"
  end

  # -- through the real Guard -------------------------------------------------

  # The steps of one case, taken in order by the fakes below; each checks
  # that the guard did what the step says.
  class Script
    attr_reader :kase

    def initialize(kase)
      @kase = kase
      @steps = kase.fetch("steps")
      @at = 0
    end

    # The next step, which must be of kind `kind`: [step, answer].
    def take(kind)
      recorded = @steps[@at] or raise Mismatch, "the guard did #{kind} after the case's last step"
      step = recorded.fetch("step")
      raise Mismatch, "step #{@at + 1}: the guard did #{kind}, the case says #{JSON.generate(step)}" unless step["do"] == kind

      @at += 1
      [step, recorded["answer"]]
    end

    def check(what, expected, got)
      raise Mismatch, "step #{@at}: #{what} #{got.inspect}, the case says #{expected.inspect}" unless expected == got
    end

    # The end step, once every other step was taken.
    def finish
      last = @steps[@at]
      raise Mismatch, "the guard ended before step #{@at + 1}" unless @at == @steps.size - 1

      last.fetch("step")
    end
  end

  class Mismatch < StandardError; end

  def self.snapshot(row)
    return nil if row.nil?

    record = Onceonly::Record.new(job_type: DELIVERY["job_type"], op_key: DELIVERY["op_key"], state: row["state"],
                                  token: row["token"], owner: row["owner"], attempts: row["attempts"],
                                  fingerprint: row["fingerprint"], external_ref: row["external_ref"],
                                  result: row["result"], cancel_requested: row["cancel_requested"],
                                  error: row["error"], due_at: row["due_at_ms"], claimed_at: row["claimed_at_ms"],
                                  lease_until: row["lease_until_ms"])
    Onceonly::Snapshot.new(record, row["now_ms"])
  end

  # A store whose every statement is the case's next step.
  class ScriptedStore < Onceonly::Store
    def initialize(script, job)
      super("scripted://")
      @script = script
      @job = job
    end

    def op_claim(job_type:, op_key:, fingerprint:, payload:, owner:, lease_ms:, conn: nil)
      _, answer = @script.take("claim")
      @script.check("claimed", [DELIVERY["job_type"], DELIVERY["op_key"], DELIVERY["fingerprint"], DELIVERY["owner"],
                                @job["lease_ms"]], [job_type, op_key, fingerprint, owner, lease_ms])
      return [:claimed, Onceonly::Claim.new(**answer["claimed"].transform_keys(&:to_sym))] if answer["claimed"]

      [:existing, DecisionsTest.snapshot(answer.fetch("existing"))]
    end

    def op_take_over(job_type:, op_key:, stale_token:, to:, owner:, lease_ms:, reason:)
      step, answer = @script.take("take_over")
      @script.check("took over", [Onceonly::Protocol.take_over_to(step["settle"].to_sym), step["stale_token"],
                                  step["reason"], DELIVERY["owner"], @job["lease_ms"]],
                    [to, stale_token, reason, owner, lease_ms])
      answer && Onceonly::Claim.new(token: answer["token"], attempts: answer["attempts"])
    end

    def op_move(job_type:, op_key:, token:, from:, to:, unless_cancel_requested: false,
                external_ref: nil, result: nil, error: nil, retry_after_ms: nil, conn: nil)
      step, answer = @script.take("move")
      expected = Onceonly::Protocol.owner_op(step["move"], job_type: DELIVERY["job_type"], op_key: DELIVERY["op_key"],
                                                           token: step["token"], external_ref: step["external_ref"],
                                                           result: step["result"], error: step["error"],
                                                           retry_after_ms: step["retry_after_ms"])
      got = { job_type: job_type, op_key: op_key, token: token, from: from, to: to,
              unless_cancel_requested: unless_cancel_requested, external_ref: external_ref, result: result,
              error: error, retry_after_ms: retry_after_ms }
      @script.check("moved", expected, got)
      answer
    end

    def op_get(job_type, op_key, conn: nil)
      _, answer = @script.take("read")
      @script.check("read", [DELIVERY["job_type"], DELIVERY["op_key"]], [job_type, op_key])
      DecisionsTest.snapshot(answer)
    end

    def op_audit(job_type:, op_key:, event:, actor:, token:, from: nil, to: nil, detail: nil,
                 attempt: nil, retry_after_ms: nil)
      step, = @script.take("audit")
      @script.check("appended", step.slice("event", "token", "from", "to", "detail", "attempt", "retry_after_ms")
                                    .merge("actor" => DELIVERY["owner"]),
                    { "event" => event, "token" => token, "from" => from, "to" => to, "detail" => detail,
                      "attempt" => attempt, "retry_after_ms" => retry_after_ms, "actor" => actor })
      1
    end
  end

  # The effect: each call is the case's next step.
  class ScriptedEffect
    def initialize(script)
      @script = script
    end

    def perform(_ctx)
      _, answer = @script.take("perform")
      kind, why = answer.is_a?(Hash) ? answer.first : [answer, nil]
      case kind
      when "done" then Onceonly::Done.new(external_ref: why["external_ref"], result: why["result"])
      when "not_sent" then raise Onceonly::Effect::NotSent, why
      when "unknown" then raise Onceonly::Effect::Unknown, why
      when "failed" then raise Onceonly::Effect::PermanentFailure, why
      else raise Mismatch, "a perform answer the shell cannot give here: #{answer.inspect}"
      end
    end

    def lookup(_ctx)
      _, answer = @script.take("lookup")
      return nil if answer == "not_found"
      return Onceonly::Done.new(**answer["found"].transform_keys(&:to_sym)) if answer["found"]

      raise Onceonly::Error, answer.fetch("unavailable")
    end

    def withdraw(_ctx, external_ref)
      step, answer = @script.take("withdraw")
      @script.check("withdrew", step["external_ref"], external_ref)
      return true if answer == "withdrawn"

      raise Onceonly::Error, answer.fetch("not_withdrawn")
    end
  end

  # What an effect's context answers for the cancel flag (its heartbeats
  # keep it): the case's next step.
  class ScriptedCtx < Onceonly::EffectCtx
    attr_accessor :script

    def cancel_requested?
      script.take("cancel_requested")[1]
    end
  end

  # The real guard, its clock's sleep and its effect's cancel flag answered
  # from the case.
  class ScriptedGuard < Onceonly::Guard
    attr_accessor :script

    def ctx_for(op_key, claim, payload)
      ScriptedCtx.new(job_type: spec.job_type, op_key: op_key, token: claim.token, attempt: claim.attempts,
                      payload: payload.value).tap { |c| c.script = script }
    end

    private

    def sleep(seconds)
      step, = script.take("sleep")
      script.check("slept ms", step["ms"], (seconds * 1000).round)
    end
  end

  # Answers the shell gives only from its clock, its heartbeats or Celery,
  # and the words of an exception it words itself.
  UNREPRODUCIBLE = %w[timed_out claim_lost lease_unrenewed interrupted raised].freeze

  def self.through_guard?(kase)
    return false unless %w[run local].include?(kase["entry"]["entry"])

    kase["steps"].none? do |s|
      a = s["answer"]
      kind = a.is_a?(Hash) && a.size == 1 ? a.keys.first : a
      UNREPRODUCIBLE.include?(kind) || (a.is_a?(Hash) && a["done"].is_a?(Hash) && a["done"].key?("unstored"))
    end
  end

  def self.guard_for(kase)
    job = kase["job"]
    script = Script.new(kase)
    spec = Onceonly::JobSpec.new(job_type: DELIVERY["job_type"], effect: job["effect"].to_sym,
                                 on_stale: job["on_stale"]&.to_sym, lease: "#{job['lease_ms']}ms",
                                 timeout: "#{job['timeout_ms']}ms")
    guard = ScriptedGuard.new(ScriptedStore.new(script, job), spec, owner: DELIVERY["owner"],
                                                                   max_retries: job["max_retries"])
    guard.script = script
    guard.fault_hook = lambda do |point, _ctx|
      step, answer = script.take("fault")
      script.check("fault point", step["point"], point.to_s)
      raise Onceonly::InjectedCrash, point if answer == "crash"
    end
    [guard, script]
  end

  # nil when the guard took the case's steps and ended as it does, else why not.
  def self.through(kase)
    guard, script = guard_for(kase)
    payload = Onceonly::Payload.stored("{}", DELIVERY["fingerprint"])
    ended =
      begin
        if kase["entry"]["entry"] == "local"
          guard.run_local_in(:no_connection, DELIVERY["op_key"], payload) do |_conn, _ctx|
            ScriptedEffect.new(script).perform(nil).result
          end
        else
          guard.run(DELIVERY["op_key"], payload, ScriptedEffect.new(script))
        end
      rescue Onceonly::Error => e
        e
      end
    same_end(script.finish, ended)
  rescue Mismatch => e
    "#{kase['name']}: #{e.message}"
  end

  def self.same_end(step, ended)
    expected =
      if step["do"] == "finish"
        Onceonly::Decide.outcome(step["outcome"])
      else
        kind, v = step["error"].first
        case kind
        when "lost_claim" then [Onceonly::LostClaim, v["token"], snapshot(v["row"]).record]
        when "payload_mismatch" then [Onceonly::PayloadMismatch, v["stored"], v["offered"]]
        when "not_found" then [Onceonly::NotFound]
        when "injected_crash" then [Onceonly::InjectedCrash, v["point"]]
        when "local_effect_failed" then [Onceonly::LocalEffectFailed, v["why"]]
        else [kind]
        end
      end
    got =
      case ended
      when Onceonly::LostClaim then [ended.class, ended.token, ended.record]
      when Onceonly::PayloadMismatch then [ended.class, ended.stored, ended.offered]
      when Onceonly::NotFound then [ended.class]
      when Onceonly::InjectedCrash then [ended.class, ended.point.to_s]
      when Onceonly::LocalEffectFailed then [ended.class, ended.message[/rolled back: (.*)\z/m, 1]]
      when Exception then [ended.class, ended.message]
      else ended
      end
    "ended in #{got.inspect}, the case in #{expected.inspect}" unless got == expected
  end

  def test_the_cases_the_shell_can_reproduce_through_the_real_guard
    cases = CASES.select { |kase| self.class.through_guard?(kase) }
    failures = cases.filter_map { |kase| (why = self.class.through(kase)) && "#{kase['name']}: #{why}" }
    failures.map! { |f| f.sub(/\A(.*?): \1: /, '\1: ') }
    puts "\ndecisions through the guard: #{cases.size} of #{CASES.size} cases " \
         "(the rest answer from a clock, a heartbeat, Celery, or are a relay's)"
    assert_operator cases.size, :>=, 300, "too few cases run through the guard"
    assert failures.empty?, "#{failures.size} of #{cases.size} cases differ; the first:\n#{failures.first(5).join("\n")}"
  end
end
