# frozen_string_literal: true

require "timeout"

module Onceonly
  # Bounds a block by a time limit with one watcher thread per process.
  # Timeout.timeout of the timeout gem before 0.4 (Ruby 3.1's) starts a thread
  # per call: one per job, which under Sidekiq's threads cost more than the
  # job's statements. Raises Timeout::Error, as Timeout.timeout does.
  module Deadline
    # Raised in the block's thread when its time is up: an Exception, not a
    # StandardError, so the block's own `rescue => e` cannot swallow it.
    class Passed < Exception; end # rubocop:disable Lint/InheritException

    Request = Struct.new(:thread, :at, :passed)

    @lock = Mutex.new
    @wake = ConditionVariable.new
    @requests = []
    @watcher = nil
    @pid = nil
    @next_at = nil # when the watcher wakes next (nil: when signalled)

    class << self
      # The block's value; Timeout::Error when it still ran after `seconds`
      # (it is stopped by an exception raised in it).
      def within(seconds)
        request = Request.new(Thread.current, monotonic + seconds, Passed.new("execution expired"))
        @lock.synchronize do
          start_watcher
          @requests << request
          # Wake the watcher only when it sleeps past this deadline (with one
          # timeout for all jobs, a new request is never the earliest).
          @wake.signal if @next_at.nil? || request.at < @next_at
        end
        begin
          yield
        ensure
          # Under the lock: once the request is gone the watcher cannot raise
          # in this thread; one raised just before lands here, still rescued below.
          @lock.synchronize { @requests.delete(request) }
        end
      rescue Passed => e
        raise unless e.equal?(request.passed)

        raise Timeout::Error, "execution expired"
      end

      private

      def monotonic
        Process.clock_gettime(Process::CLOCK_MONOTONIC)
      end

      # Called holding the lock. A forked child has no watcher thread and
      # none of its parent's requests.
      def start_watcher
        return if @pid == Process.pid && @watcher&.alive?

        @requests = [] unless @pid == Process.pid
        @pid = Process.pid
        @next_at = nil
        @watcher = Thread.new { watch }
        @watcher.name = "onceonly-deadline"
      end

      def watch
        @lock.synchronize do
          loop do
            now = monotonic
            due, @requests = @requests.partition { |r| r.at <= now }
            due.each { |r| r.thread.raise(r.passed) }
            @next_at = @requests.map(&:at).min
            @next_at ? @wake.wait(@lock, @next_at - now) : @wake.wait(@lock)
          end
        end
      end
    end
  end
end
