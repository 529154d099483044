# frozen_string_literal: true

module Onceonly
  module Sidekiq
    # Client middleware: a guarded job whose arguments give a bad key or a
    # payload with no JSON form is refused at push time, with an
    # Onceonly::InvalidInput naming the problem; nothing reaches Redis or the
    # database.
    class ClientCheck
      def call(worker_class, job, _queue, _redis_pool)
        klass = self.class.job_class(worker_class)
        if klass.respond_to?(:onceonly_config)
          config = klass.onceonly_config
          config.key_for(job["args"])
          config.payload_for(job["args"])
        end
        yield
      end

      # The class, or nil for one this process does not know (not ours to check).
      def self.job_class(worker_class)
        return worker_class unless worker_class.is_a?(String)

        Object.const_get(worker_class)
      rescue NameError
        nil
      end
    end
  end
end
