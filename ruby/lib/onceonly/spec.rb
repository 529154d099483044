# frozen_string_literal: true

module Onceonly
  # Effect kinds (docs/DESIGN.md section 3) and the stale-claim policies of opaque effects.
  EFFECT_KINDS = %i[local keyed lookup opaque].freeze
  STALE_POLICIES = %i[hold at_least_once at_most_once].freeze

  # Durations as users give them: seconds (Numeric) or text like 500ms, 2s, 5m.
  module Duration
    UNITS = { "ms" => 1, "s" => 1000, "m" => 60_000, "h" => 3_600_000 }.freeze

    module_function

    # Milliseconds, naming the problem when `value` is not a duration.
    def ms(value, what = "duration")
      case value
      when Integer, Float
        raise InvalidInput, "#{what} #{value} must not be negative" if value.negative?

        (value * 1000).round
      when String
        m = value.strip.match(/\A(\d+(?:\.\d+)?)\s*(ms|s|m|h)\z/)
        raise InvalidInput, "#{what} #{value.inspect} is not a duration like 500ms, 2s or 5m" unless m

        (m[1].to_f * UNITS[m[2]]).round
      else
        raise InvalidInput, "#{what} must be seconds or a text like 500ms, 2s or 5m, got #{value.inspect}"
      end
    end

    # 500ms, 10s, 1m 30s: how the Rust core prints durations.
    def format(ms)
      return "0s" if ms.zero?
      return "#{ms}ms" if ms < 1000

      parts = []
      h, rest = ms.divmod(3_600_000)
      m, rest = rest.divmod(60_000)
      s, milli = rest.divmod(1000)
      parts << "#{h}h" if h.positive?
      parts << "#{m}m" if m.positive?
      parts << "#{s}s" if s.positive?
      parts << "#{milli}ms" if milli.positive?
      parts.join(" ")
    end
  end

  # A guarded job's settings. `validate!` checks the job type and the timing
  # rules of docs/DESIGN.md section 4; every duration is held in milliseconds.
  class JobSpec
    attr_reader :job_type, :effect, :on_stale, :lease_ms, :timeout_ms, :heartbeat_ms,
                :redelivery_timeout_ms, :lock_lifetime_ms, :redelivery_setting

    # effect: :local, :keyed, :lookup or :opaque; on_stale (opaque only):
    # :hold (default), :at_least_once or :at_most_once. Defaults as the CLI:
    # lease 30s, timeout 10s, no heartbeat. redelivery_setting: where the
    # user sets the redelivery timeout, named when a rule refuses it.
    def initialize(job_type:, effect:, on_stale: nil, lease: 30, timeout: 10, heartbeat: nil,
                   redelivery_timeout: nil, lock_lifetime: nil, redelivery_setting: "redelivery_timeout")
      @job_type = Keys.validate_job_type!(job_type)
      @effect = self.class.symbol(effect, EFFECT_KINDS, "effect kind")
      if on_stale && @effect != :opaque
        raise InvalidInput, "on_stale applies to opaque effects only; #{@effect} effects settle a stale claim themselves"
      end
      @on_stale = @effect == :opaque ? self.class.symbol(on_stale || :hold, STALE_POLICIES, "stale-claim policy") : nil
      @lease_ms = Duration.ms(lease, "lease")
      @timeout_ms = Duration.ms(timeout, "timeout")
      @heartbeat_ms = heartbeat && Duration.ms(heartbeat, "heartbeat")
      @redelivery_timeout_ms = redelivery_timeout && Duration.ms(redelivery_timeout, "redelivery timeout")
      @lock_lifetime_ms = lock_lifetime && Duration.ms(lock_lifetime, "lock lifetime")
      @redelivery_setting = redelivery_setting.to_s
      freeze
    end

    def self.symbol(value, allowed, what)
      sym = value.to_s.tr("-", "_").to_sym
      return sym if allowed.include?(sym)

      raise InvalidInput, "unknown #{what} #{value.inspect}; one of #{allowed.map { |a| a.to_s.tr('_', '-') }.join(', ')}"
    end

    # "opaque/hold", "keyed", ... as the CLI and the replay name them.
    def kind_name
      @effect == :opaque ? "opaque/#{@on_stale.to_s.tr('_', '-')}" : @effect.to_s
    end

    # Raises TimingError naming every broken rule with its numbers.
    def validate!
      refused = Timing.refusal(job_type, broken_timing_rules)
      raise TimingError, refused if refused

      self
    end

    # Each broken timing rule as a sentence with both numbers and, in
    # brackets, the settings to change; empty when all hold. Worded as every
    # client words it (protocol/corpus/timing.json). shutdown_timeout_ms:
    # Sidekiq's, checked at startup.
    def broken_timing_rules(shutdown_timeout_ms: nil)
      d = Duration.method(:format)
      broken = []
      if lease_ms.zero? || timeout_ms.zero?
        broken << "lease (#{d.(lease_ms)}) and timeout (#{d.(timeout_ms)}) must both be above zero " \
                  "[change lease or timeout]"
      end
      if heartbeat_ms.nil?
        if timeout_ms >= lease_ms
          broken << "job timeout (#{d.(timeout_ms)}) must be shorter than the lease (#{d.(lease_ms)}), " \
                    "or a heartbeat must renew the lease [change timeout, lease or heartbeat]"
        end
      elsif heartbeat_ms.zero? || heartbeat_ms > lease_ms / 3
        broken << "heartbeat (#{d.(heartbeat_ms)}) must renew the lease at least every lease/3 (#{d.(lease_ms / 3)}) " \
                  "[change heartbeat or lease]"
      end
      if redelivery_timeout_ms && redelivery_timeout_ms <= timeout_ms
        broken << "queue redelivery timeout (#{d.(redelivery_timeout_ms)}) must be longer than " \
                  "the job timeout (#{d.(timeout_ms)}) [change #{redelivery_setting} or timeout]"
      end
      if lock_lifetime_ms && lock_lifetime_ms <= timeout_ms
        broken << "lock lifetime (#{d.(lock_lifetime_ms)}) must be longer than the job timeout (#{d.(timeout_ms)}) " \
                  "[change lock_lifetime or timeout]"
      end
      if shutdown_timeout_ms && shutdown_timeout_ms <= timeout_ms
        broken << "Sidekiq's shutdown timeout (#{d.(shutdown_timeout_ms)}) must be longer than the job timeout " \
                  "(#{d.(timeout_ms)}), or a deploy stops the job mid-effect [change timeout or Sidekiq's shutdown timeout (-t)]"
      end
      broken
    end
  end

  # How every client words a refused start (protocol/corpus/timing.json).
  module Timing
    module_function

    # One line per broken rule, "job JOB: RULE".
    def lines(job_type, rules)
      rules.map { |r| "job #{job_type}: #{r}" }
    end

    # The TimingError message, or nil when every rule holds.
    def refusal(job_type, rules)
      return nil if rules.empty?

      "timing rule broken: #{lines(job_type, rules).join('; ')}"
    end
  end
end
