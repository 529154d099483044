# frozen_string_literal: true

require "json"
require "securerandom"
require "fileutils"
require "tmpdir"
require "onceonly/replay/allowed"
require "onceonly/replay/workers"

module Onceonly
  module Replay
    # docs/DESIGN.md section 5 through real Sidekiq processes: jobs pushed to
    # Redis, processes SIGKILLed at both crash points, the re-drive bringing
    # back what a dead process held. Every scenario runs on the guarded job
    # and on a naive one (read state, then act) for each effect kind; the
    # report has the shape of `onceonly replay --json`.
    class Harness
      SCENARIOS = [
        [1, "repeat", "same message 3 times", nil],
        [2, "concurrent", "2 deliveries at once", nil],
        [3, "crash_after_claim", "dies after claim (fault)", "fault"],
        [3, "crash_after_claim", "dies after claim (SIGKILL)", "SIGKILL"],
        [4, "crash_after_effect", "dies after effect (fault)", "fault"],
        [4, "crash_after_effect", "dies after effect (SIGKILL)", "SIGKILL"],
        [5, "lease", "young claim kept, old by policy", nil],
        [6, "similar_data", "2 ops, similar data", nil],
        [7, "cancel_while_sending", "cancel while sending", nil],
        [8, "failure_after_success", "failure after success", nil],
        [9, "other_payload", "same key, other payload", nil]
      ].freeze

      attr_reader :entries

      def initialize(redis_url:, db_url:, runs:, processes:, concurrency: 1, lease_ms: 2000, framework: "sidekiq", out: $stdout)
        raise InvalidInput, "--framework must be sidekiq or activejob" unless %w[sidekiq activejob].include?(framework)
        raise InvalidInput, "--runs must be at least 1" unless runs.positive?
        raise InvalidInput, "--processes must be at least 2 (the same message to two workers at once)" if processes < 2

        @redis_url = redis_url
        @db_url = db_url
        @runs = runs
        @processes = processes
        @concurrency = concurrency
        @lease_ms = lease_ms
        @framework = framework
        @out = out
        @run_id = "rb#{SecureRandom.hex(4)}"
        @entries = []
      end

      # Runs every scenario; returns the report (a Hash).
      def run
        started = monotonic
        setup
        SCENARIOS.each_with_index do |(number, scenario, title, variant), i|
          @out.puts format("[%2d/%d] %s", i + 1, SCENARIOS.size, title)
          t = monotonic
          by_kind = send("run_#{scenario}", variant)
          Jobs::KINDS.each_key do |kind|
            @entries << entry(number, scenario, title, variant, kind, by_kind[kind], ((monotonic - t) * 1000).round)
          end
        end
        done = report(((monotonic - started) * 1000).round)
        @workers.stop
        FileUtils.rm_rf(@log_dir) if done["pass"] # kept for a look when something failed
        done
      ensure
        @workers&.stop
        release_redis_db
      end

      private

      # -- setup ---------------------------------------------------------------

      def setup
        ENV["REDIS_URL"] = @redis_url
        ENV["ONCEONLY_DB"] = @db_url
        ENV["ONCEONLY_REPLAY_RUN"] = @run_id
        ENV["ONCEONLY_REPLAY_LEASE_MS"] = @lease_ms.to_s
        ENV["ONCEONLY_REPLAY_FRAMEWORK"] = @framework
        ::Sidekiq.configure_client { |c| c.redis = { url: @redis_url } }
        ::Sidekiq.logger.level = Logger::WARN
        claim_redis_db
        require "onceonly/replay/jobs"
        @store = Onceonly.connect(@db_url)
        @store.migrate
        @store.with_connection do |c|
          sql = "CREATE TABLE IF NOT EXISTS #{Jobs::TABLE} (job_type TEXT NOT NULL, op_key TEXT NOT NULL)"
          if c.respond_to?(:exec) then c.exec("SET client_min_messages TO warning; #{sql}")
          elsif Jobs.mysql?(c) then c.query("#{sql} ENGINE = InnoDB")
          else c.execute(sql)
          end
        end
        Onceonly::Sidekiq.store = @store
        @log_dir = Dir.mktmpdir("onceonly-replay-")
        @workers = Workers.new(count: @processes, concurrency: @concurrency, log_dir: @log_dir,
                               env: { "REDIS_URL" => @redis_url, "ONCEONLY_DB" => @db_url,
                                      "ONCEONLY_REPLAY_RUN" => @run_id,
                                      "ONCEONLY_REPLAY_LEASE_MS" => @lease_ms.to_s,
                                      "ONCEONLY_REPLAY_FRAMEWORK" => @framework })
        @workers.start
        @out.puts "#{@processes} Sidekiq processes (concurrency #{@concurrency}#{active_job? ? ', ActiveJob jobs' : ''}) on #{@redis_url}; " \
                  "#{Onceonly.redact(@db_url)}; lease #{Duration.format(@lease_ms)}; run #{@run_id}"
      end

      LEASE_KEY = "onceonly:replay:running"

      # The replay needs a Redis database of its own: it empties it. A lease
      # (renewed while the run lasts) keeps a second replay from emptying it
      # under a running one.
      def claim_redis_db
        ::Sidekiq.redis do |r|
          unless r.set(LEASE_KEY, @run_id, nx: true, px: 15_000)
            raise InvalidInput, "Redis database #{@redis_url} is in use by replay run #{r.get(LEASE_KEY)}; " \
                                "wait for it, or give this one another database number"
          end
          if r.dbsize > 1 && !r.exists?("onceonly:replay")
            r.del(LEASE_KEY)
            raise InvalidInput, "Redis database #{@redis_url} holds #{r.dbsize - 1} keys that are not a replay's; " \
                                "give the replay a database number of its own (redis://HOST:6379/N)"
          end
          r.flushdb
          r.set(LEASE_KEY, @run_id, px: 15_000)
          r.set("onceonly:replay", @run_id)
        end
        @lease = Thread.new do
          loop do
            sleep 5
            ::Sidekiq.redis { |r| r.set(LEASE_KEY, @run_id, px: 15_000) }
          end
        end
      end

      def release_redis_db
        @lease&.kill
        ::Sidekiq.redis { |r| r.del(LEASE_KEY) if r.get(LEASE_KEY) == @run_id }
      end

      # -- driving Sidekiq -------------------------------------------------------

      def push(klass, key, data = {})
        return klass.perform_later(key, data).provider_job_id if active_job?

        ::Sidekiq::Client.push("class" => klass, "args" => [key, data], "queue" => Jobs::QUEUE)
      end

      # ActiveJob jobs (--framework activejob): a delivery that meets a live
      # claim ends instead of going back to Sidekiq's retry, and the re-drive
      # brings the operation back once the claim is past its lease.
      def active_job?
        @framework == "activejob"
      end

      # ActiveJob: the re-drive after the leases of claims left live (a
      # fault, a young claim) ran out; Sidekiq's retry did that for Sidekiq jobs.
      def redrive_live_claims
        return [] unless active_job?

        sleep(@lease_ms / 1000.0 + 0.2)
        pushed = Onceonly::Sidekiq::Redrive.run(classes: Jobs::GUARDED.values)
        drain
        pushed
      end

      # Waits until nothing is queued, running, or waiting to be retried.
      # A retry is handed back 0.3s after its last failure instead of after
      # Sidekiq's delay and jitter, to keep the run short; it still goes
      # through Sidekiq's retry.
      def drain(timeout: 120)
        deadline = monotonic + timeout
        quiet = 0
        loop do
          @workers.reap
          queued = ::Sidekiq::Queue.new(Jobs::QUEUE).size
          busy = @workers.busy
          retries = ::Sidekiq::RetrySet.new
          retries.each { |job| job.retry if Time.now.to_f - (job["retried_at"] || job["failed_at"]).to_f > 0.3 }
          scheduled = ::Sidekiq::ScheduledSet.new.size # ActiveJob's retry_job
          idle = queued.zero? && busy.zero? && retries.size.zero? && scheduled.zero?
          quiet = idle ? quiet + 1 : 0
          return if quiet >= 3

          raise Error, "Sidekiq did not settle in #{timeout}s (#{queued} queued, #{busy} busy, #{retries.size} retries)" if monotonic > deadline

          sleep 0.1
        end
      end

      def arm(job_type, key, mode, point)
        Jobs.redis { |r| r.set(Jobs.rkey(:crash, job_type, key), "#{mode}:#{point}") }
      end

      # Waits until every armed crash point of `key` was reached.
      def wait_disarmed(key, timeout: 30)
        deadline = monotonic + timeout
        loop do
          @workers.reap
          armed = Jobs.redis { |r| r.keys(Jobs.rkey(:crash, "*", key)) }
          return if armed.empty?
          raise Error, "crash points never reached: #{armed.join(', ')}" if monotonic > deadline

          sleep 0.05
        end
      end

      def reached(job_type, key)
        text = Jobs.redis { |r| r.get(Jobs.rkey(:reached, job_type, key)) }
        text && JSON.parse(text)
      end

      def outcomes(job_type, key)
        Jobs.redis { |r| r.lrange(Jobs.rkey(:outcome, job_type, key), 0, -1) }
      end

      # -- counting --------------------------------------------------------------

      def effects(kind, key, naive: false)
        job_type = Jobs.job_type(kind, naive: naive)
        if kind == "local"
          @store.with_connection do |c|
            if c.respond_to?(:exec_params)
              c.exec_params("SELECT count(*) FROM #{Jobs::TABLE} WHERE job_type = $1 AND op_key = $2", [job_type, key]).getvalue(0, 0).to_i
            elsif Jobs.mysql?(c)
              Jobs.mysql_run(c, "SELECT count(*) FROM #{Jobs::TABLE} WHERE job_type = ? AND op_key = ?", [job_type, key]).first.first
            else
              c.get_first_value("SELECT count(*) FROM #{Jobs::TABLE} WHERE job_type = ? AND op_key = ?", [job_type, key])
            end
          end
        else
          Jobs.redis { |r| r.hget(Jobs.rkey(:sends), "#{job_type}:#{key}") }.to_i
        end
      end

      def live(kind, key, naive: false)
        Jobs.redis { |r| r.exists?(Jobs.rkey(:item, "#{Jobs.job_type(kind, naive: naive)}:#{key}")) } ? 1 : 0
      end

      def record(kind, key)
        @store.op_get(Jobs.job_type(kind), key)&.record
      end

      # One run's result: guarded and naive counts, the record, notes, checks.
      Result = Struct.new(:guarded, :naive, :records, :notes, :checks, :error, :skipped, keyword_init: true) do
        def check(name, passed, detail)
          checks << { "detail" => detail, "name" => name, "passed" => passed ? true : false }
        end
      end

      def result
        Result.new(guarded: [], naive: [], records: [], notes: [], checks: [], error: nil, skipped: nil)
      end

      def keys_for(scenario, variant, count = 1)
        Array.new(count) { |i| "#{@run_id}/#{scenario}#{variant ? "-#{variant.downcase}" : ''}/#{i + 1}" }
      end

      def tally(res, kind, key, counted: "effects")
        res.guarded << (counted == "live" ? live(kind, key) : effects(kind, key))
        res.naive << (counted == "live" ? live(kind, key, naive: true) : effects(kind, key, naive: true))
        res.records << record(kind, key)
      end

      # -- the scenarios ---------------------------------------------------------

      def run_repeat(_variant)
        key = keys_for("s1", nil).first
        3.times do
          Jobs::KINDS.each_key do |kind|
            push(Jobs::GUARDED[kind], key)
            push(Jobs::NAIVE[kind], key)
          end
          drain
        end
        Jobs::KINDS.each_key.to_h do |kind|
          res = result
          tally(res, kind, key)
          said = outcomes(Jobs.job_type(kind), key)
          res.notes << "deliveries: #{said.join(' / ')}"
          res.check("the 2nd and 3rd deliveries got the stored result",
                    said.size == 3 && said.drop(1).all? { |s| s.include?("a repeat") }, said.join(" / "))
          [kind, res]
        end
      end

      def run_concurrent(_variant)
        keys = keys_for("s2", nil, @runs)
        keys.each do |key|
          Jobs::KINDS.each_key do |kind|
            2.times { push(Jobs::GUARDED[kind], key, "delay_ms" => 10) }
            2.times { push(Jobs::NAIVE[kind], key, "delay_ms" => 10) }
          end
        end
        drain(timeout: 60 + @runs)
        Jobs::KINDS.each_key.to_h do |kind|
          res = result
          errors = []
          keys.each do |key|
            tally(res, kind, key)
            errors.concat(outcomes(Jobs.job_type(kind), key).grep(/\Aerror/))
          end
          in_progress = keys.sum { |key| outcomes(Jobs.job_type(kind), key).count { |s| s.start_with?("in progress") } }
          res.notes << "#{in_progress} deliveries found the other's live claim and went back to Sidekiq's retry"
          res.check("no delivery got an error", errors.empty?, errors.first(3).join("; ").then { |s| s.empty? ? "none" : s })
          [kind, res]
        end
      end

      def run_crash_after_claim(variant)
        crash(:after_claim, variant)
      end

      def run_crash_after_effect(variant)
        crash(:after_effect, variant)
      end

      # Arms the crash point for one operation per kind (guarded and naive),
      # pushes the jobs, and after the lease brings back what died: the
      # re-drive for guarded jobs, a push again for naive ones (as a
      # reliable fetch would; naive jobs have no record to re-drive from).
      def crash(point, variant)
        key = keys_for("s#{point == :after_claim ? 3 : 4}", variant).first
        mode = variant == "SIGKILL" ? "sigkill" : "fault"
        pushed_at = Time.now
        Jobs::KINDS.each_key do |kind|
          [Jobs::GUARDED[kind], Jobs::NAIVE[kind]].each do |klass|
            arm(Jobs.job_type(kind, naive: klass.name.include?("Naive")), key, mode, point)
            push(klass, key)
          end
        end
        wait_disarmed(key)
        left = Jobs::KINDS.each_key.to_h { |kind| [kind, record(kind, key)] }
        drain # a fault goes to Sidekiq's retry, which settles it; a killed job is gone
        sleep(@lease_ms / 1000.0 + 0.2) if mode == "sigkill" # the claims' leases run out on the database's clock
        redriven = Onceonly::Sidekiq::Redrive.run(classes: Jobs::GUARDED.values)
        redriven += redrive_live_claims if mode == "fault"
        if mode == "sigkill"
          Jobs::KINDS.each_key { |kind| push(Jobs::NAIVE[kind], key) if reached(Jobs.job_type(kind, naive: true), key) }
        end
        drain
        Jobs::KINDS.each_key.to_h do |kind|
          res = result
          tally(res, kind, key)
          hit = reached(Jobs.job_type(kind), key)
          if mode == "sigkill"
            death = hit && @workers.death_of(hit["pid"])
            detail = hit ? "pid #{hit['pid']} reached #{point} #{((hit['at'] - pushed_at.to_f) * 1000).round}ms after the push, " \
                           "ended by #{death&.status&.termsig ? "signal #{death.status.termsig}" : 'no signal seen'}" : "never reached"
            res.notes << detail
            res.check("the worker process was killed by SIGKILL at #{point}", death&.status&.termsig == 9, detail)
          else
            res.check("the worker died at #{point}", !hit.nil?, hit ? "error: injected crash at #{point}" : "never reached")
          end
          l = left[kind]
          res.notes << "left by the dead worker: #{l ? "#{l.state} (token #{l.token}, attempts #{l.attempts})" : 'no record'}"
          mine = redriven.select { |p| p.job_type == Jobs.job_type(kind) }
          res.notes << "re-drive: #{mine.empty? ? 'nothing to push (settled by Sidekiq\'s retry)' : mine.map { |p| "pushed #{p.state} token #{p.token}" }.join(', ')}"
          if mode == "sigkill"
            res.check("the re-drive pushed the dead process's operation again", mine.any?,
                      mine.empty? ? "nothing pushed" : "pushed as job #{mine.first.jid}")
          end
          said = outcomes(Jobs.job_type(kind), key)
          final = said.last.to_s
          res.notes << "deliveries: #{said.join(' / ')}"
          res.check("the redelivery after the lease returned without error", !final.start_with?("error") && !final.empty?,
                    final.empty? ? "no delivery after the crash" : final)
          [kind, res]
        end
      end

      def run_lease(_variant)
        key = keys_for("s5", nil).first
        Jobs::KINDS.each_key do |kind|
          klass = Jobs::GUARDED[kind]
          dying = Guard.new(@store, klass.onceonly_config.spec, owner: "replay-first-worker",
                                                                fault_hook: ->(p, _) { raise InjectedCrash, p if p == :after_claim })
          begin
            if kind == "local"
              dying.run_local(key, klass.onceonly_config.payload_for([key, {}])) { raise "acted" }
            else
              dying.run(key, klass.onceonly_config.payload_for([key, {}])) { raise "acted" }
            end
          rescue InjectedCrash
            nil
          end
          push(klass, key)
        end
        # The deliveries meet a live claim; they go back to Sidekiq's retry
        # until the lease is over, then the policy decides.
        sleep 0.5
        young = Jobs::KINDS.each_key.to_h { |kind| [kind, [effects(kind, key), record(kind, key)&.state]] }
        drain
        redrive_live_claims
        Jobs::KINDS.each_key { |kind| push(Jobs::NAIVE[kind], key) }
        drain
        Jobs::KINDS.each_key.to_h do |kind|
          res = result
          tally(res, kind, key)
          said = outcomes(Jobs.job_type(kind), key)
          res.notes << "deliveries: #{said.join(' / ')}"
          if kind == "local"
            res.check("no local claim outlives its transaction: the delivery did it", young[kind][1] != "claimed",
                      "after 0.5s: #{young[kind][1] || 'no record'}")
          else
            res.check("a claim younger than its lease was left alone", young[kind] == [0, "claimed"],
                      "after 0.5s: #{young[kind][0]} effects, #{young[kind][1]}")
          end
          res.check("the redelivery past the lease returned without error", !said.last.to_s.start_with?("error"), said.last.to_s)
          [kind, res]
        end
      end

      def run_similar_data(_variant)
        keys = keys_for("s6", nil, 2)
        Jobs::KINDS.each_key do |kind|
          keys.each_with_index do |key, i|
            push(Jobs::GUARDED[kind], key, "amount" => 10 + i)
            push(Jobs::NAIVE[kind], key, "amount" => 10 + i)
          end
        end
        drain
        Jobs::KINDS.each_key.to_h do |kind|
          res = result
          both = keys.map { |key| effects(kind, key) }
          res.guarded << both.sum
          res.naive << keys.sum { |key| effects(kind, key, naive: true) }
          res.records.concat(keys.map { |key| record(kind, key) })
          res.check("each operation was done by its own delivery, not taken for a repeat", both == [1, 1], both.inspect)
          [kind, res]
        end
      end

      def run_cancel_while_sending(_variant)
        key = keys_for("s7", nil).first
        kinds = Jobs::KINDS.keys - ["local"]
        kinds.each do |kind|
          push(Jobs::GUARDED[kind], key, "cancel_probe" => true)
          push(Jobs::NAIVE[kind], key)
        end
        requested = {}
        deadline = Time.now + 10
        until requested.size == kinds.size || Time.now > deadline
          kinds.each do |kind|
            next if requested.key?(kind)
            next unless Jobs.redis { |r| r.exists?(Jobs.rkey(:sending, Jobs.job_type(kind), key)) }

            r = record(kind, key)
            requested[kind] = @store.op_request_cancel(job_type: r.job_type, op_key: key, token: r.token)
            Jobs.redis { |rd| rd.set(Jobs.rkey(:go, Jobs.job_type(kind), key), "1") }
          end
          sleep 0.01
        end
        drain
        Jobs::KINDS.each_key.to_h do |kind|
          res = result
          if kind == "local"
            res.skipped = "a local claim lives only inside its transaction: nothing outside can see it, or cancel it, while it runs"
            next [kind, res]
          end
          tally(res, kind, key, counted: "live")
          r = res.records.first
          res.check("the cancel was requested while the claim was live", requested[kind] == true, requested[kind].inspect)
          res.check("cancelled, and nothing of it live at the destination",
                    (r&.state == "cancelled" && res.guarded.first.zero?) || (r&.state == "completed" && r.error.to_s.include?("withdraw failed")),
                    "#{r&.state}, #{res.guarded.first} live")
          res.notes << "deliveries: #{outcomes(Jobs.job_type(kind), key).join(' / ')}"
          [kind, res]
        end
      end

      def run_failure_after_success(_variant)
        key = keys_for("s8", nil).first
        Jobs::KINDS.each_key { |kind| push(Jobs::GUARDED[kind], key) && push(Jobs::NAIVE[kind], key) }
        drain
        late = Jobs::KINDS.each_key.to_h do |kind|
          r = record(kind, key)
          [kind, @store.op_move(job_type: r.job_type, op_key: key, token: r.token, from: "claimed", to: "failed",
                                error: "a late failure report")]
        end
        Jobs::KINDS.each_key { |kind| push(Jobs::GUARDED[kind], key) && push(Jobs::NAIVE[kind], key) }
        drain
        Jobs::KINDS.each_key.to_h do |kind|
          res = result
          tally(res, kind, key)
          said = outcomes(Jobs.job_type(kind), key)
          res.notes << "deliveries: #{said.join(' / ')}"
          res.check("the late failure write changed no row", late[kind] == false, late[kind] ? "1 row changed" : "0 rows changed")
          res.check("a redelivery after the late failure got the stored result", said.last.to_s.include?("a repeat"), said.last.to_s)
          [kind, res]
        end
      end

      def run_other_payload(_variant)
        key = keys_for("s9", nil).first
        refused = {}
        Jobs::KINDS.each_key do |kind|
          push(Jobs::GUARDED[kind], key, "amount" => 1)
          push(Jobs::NAIVE[kind], key, "amount" => 1)
        end
        drain
        Jobs::KINDS.each_key do |kind|
          begin
            push(Jobs::GUARDED[kind], key, "amount" => 2)
            refused[kind] = nil
          rescue PayloadMismatch => e
            refused[kind] = e.message
          end
          push(Jobs::NAIVE[kind], key, "amount" => 2)
        end
        drain
        Jobs::KINDS.each_key.to_h do |kind|
          res = result
          tally(res, kind, key)
          res.notes << "payload 1: #{outcomes(Jobs.job_type(kind), key).join(' / ')}"
          res.notes << "payload 2 under the same key: #{refused[kind] ? "refused at push: #{refused[kind]}" : 'pushed'}"
          res.check("the other payload was refused as a key reused by another operation", !refused[kind].nil?,
                    refused[kind] ? "error: #{refused[kind]}" : "not refused")
          [kind, res]
        end
      end

      # -- the report ------------------------------------------------------------

      def entry(number, scenario, title, variant, kind, res, elapsed_ms)
        rule = Allowed.rule(scenario, kind)
        runs = res.guarded.size
        base = { "number" => number, "scenario" => scenario, "title" => title, "variant" => variant,
                 "kind" => kind.sub("opaque-", "opaque/"), "job_type" => Jobs.job_type(kind), "elapsed_ms" => elapsed_ms,
                 "runs" => runs, "error" => res.error, "notes" => res.notes, "checks" => res.checks }
        if rule.nil? || res.skipped
          return base.merge("allowed" => { "counted" => "effects", "max" => 0, "min" => 0, "states" => [], "why" => res.skipped },
                            "guarded" => { "by_run" => {}, "total" => 0 }, "naive" => { "by_run" => {}, "total" => 0 },
                            "records" => { "count" => 0, "states" => {} }, "failures" => [], "pass" => true,
                            "skipped" => nil, "verdict" => "n/a", "runs" => 0)
        end
        records = res.records.compact
        states = records.map(&:state).tally
        failures = []
        res.guarded.each_with_index do |n, i|
          failures << "run #{i + 1}: #{n} #{rule.counted}, allowed #{rule.min}-#{rule.max}" unless n.between?(rule.min, rule.max)
        end
        (states.keys - rule.states).each { |s| failures << "#{states[s]} records #{s}, allowed #{rule.states.join(' or ')}" }
        res.checks.reject { |c| c["passed"] }.each { |c| failures << "check failed: #{c['name']} (#{c['detail']})" }
        pass = failures.empty?
        base.merge("allowed" => rule.to_h, "guarded" => counts(res.guarded), "naive" => counts(res.naive),
                   "records" => { "count" => records.size, "states" => states }, "failures" => failures,
                   "pass" => pass, "skipped" => nil, "verdict" => pass ? "pass" : "fail")
      end

      def counts(list)
        { "by_run" => list.tally.sort.to_h { |n, runs| [n.to_s, runs] }, "total" => list.sum }
      end

      def report(elapsed_ms)
        verdicts = @entries.map { |e| e["verdict"] }.tally
        { "db" => Onceonly.redact(@db_url), "queue" => "sidekiq", "framework" => @framework, "redis" => @redis_url, "processes" => @processes,
          "concurrency" => @concurrency, "lease_ms" => @lease_ms, "elapsed_ms" => elapsed_ms,
          "entries" => @entries, "pass" => !verdicts.key?("fail"), "run_id" => @run_id, "runs" => @runs,
          "worker_deaths" => @workers.deaths.map { |d| { "pid" => d.pid, "signal" => d.status.termsig, "exit" => d.status.exitstatus } },
          "summary" => { "fail" => verdicts.fetch("fail", 0), "not_applicable" => verdicts.fetch("n/a", 0),
                         "pass" => verdicts.fetch("pass", 0), "planned" => 0, "skipped" => 0 } }
      end

      def monotonic
        Process.clock_gettime(Process::CLOCK_MONOTONIC)
      end
    end
  end
end
