# frozen_string_literal: true

module Onceonly
  module Sidekiq
    # Sidekiq before 6.5 calls redis-rb 4.6-4.8 the old way (BRPOP with a
    # positional timeout on every fetch, SADD's boolean on every push and
    # heartbeat), and redis-rb prints a deprecation line each time: one every
    # couple of seconds per process, drowning the job log. This drops those
    # lines, and only those: a deprecated call made from the application's own
    # code (even inside `Sidekiq.redis { }`) is still printed, and
    # `Redis.silence_deprecations` / `raise_deprecations` keep their meaning.
    module RedisDeprecations
      # The lib/ folders of the two gems, as seen in backtraces.
      REDIS_LIB = "#{File.expand_path('..', Redis.instance_method(:initialize).source_location.first)}/"
      SIDEKIQ_LIB = "#{File.expand_path('..', ::Sidekiq.method(:redis).source_location.first)}/"

      module_function

      # Installs the filter when this Sidekiq and redis-rb are the pair that needs it.
      def install!
        return false unless needed?
        return true if Redis.singleton_class.include?(Filter)

        Redis.singleton_class.prepend(Filter)
        true
      end

      def needed?
        Gem::Version.new(::Sidekiq::VERSION) < Gem::Version.new("6.5") &&
          Gem::Version.new(Redis::VERSION).between?(Gem::Version.new("4.6"), Gem::Version.new("4.99")) &&
          Redis.respond_to?(:deprecate!)
      end

      # The call that reached redis-rb was made by Sidekiq's own code: the
      # first frame outside redis-rb lies in Sidekiq's lib/.
      def from_sidekiq?(locations)
        caller_frame = locations.find { |l| !l.absolute_path.to_s.start_with?(REDIS_LIB) }
        caller_frame&.absolute_path.to_s.start_with?(SIDEKIQ_LIB)
      end

      # Prepended to Redis's singleton class.
      module Filter
        def deprecate!(message)
          return if RedisDeprecations.from_sidekiq?(caller_locations(1))

          super
        end
      end
    end
  end
end
