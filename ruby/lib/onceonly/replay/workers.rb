# frozen_string_literal: true

require "English"
require "rbconfig"
require "sidekiq/api"

module Onceonly
  module Replay
    # The real Sidekiq processes the replay runs on: started with the
    # `sidekiq` command, each with concurrency 1 by default (so a SIGKILL ends
    # exactly the job it targets); one that dies is noted and replaced.
    class Workers
      Death = Struct.new(:pid, :status, keyword_init: true)

      attr_reader :deaths, :pids

      def initialize(count:, concurrency:, env:, log_dir:)
        @count = count
        @concurrency = concurrency
        @env = env
        @log_dir = log_dir
        @pids = []
        @deaths = []
        @started = 0
      end

      def start
        @count.times { spawn_one }
        wait_ready
      end

      # Reaps processes that died (noting how), removes them from Sidekiq's
      # process list, and starts replacements.
      def reap
        @pids.dup.each do |pid|
          next unless Process.waitpid(pid, Process::WNOHANG)

          @deaths << Death.new(pid: pid, status: $CHILD_STATUS)
          @pids.delete(pid)
          forget(pid)
          spawn_one
        end
      end

      # Jobs running now on live processes.
      def busy
        ::Sidekiq::Workers.new.count { |process_id, _tid, _work| @pids.include?(process_id.split(":")[-2].to_i) }
      end

      def death_of(pid)
        @deaths.find { |d| d.pid == pid }
      end

      def stop
        return if @pids.empty?

        @pids.each { |pid| Process.kill(:TERM, pid) rescue nil } # rubocop:disable Style/RescueModifier
        deadline = Time.now + 15
        @pids.each do |pid|
          sleep 0.05 until Process.waitpid(pid, Process::WNOHANG) || Time.now > deadline
        rescue Errno::ECHILD
          nil
        end
        @pids.each { |pid| Process.kill(:KILL, pid) rescue nil } # rubocop:disable Style/RescueModifier
        @pids.clear
      end

      private

      def spawn_one
        @started += 1
        jobs = File.expand_path("jobs.rb", __dir__)
        log = File.join(@log_dir, "sidekiq-#{@started}.log")
        sidekiq = ENV.fetch("SIDEKIQ_BIN") { File.exist?("/usr/bin/sidekiq") ? "/usr/bin/sidekiq" : "sidekiq" }
        @pids << Process.spawn(@env, RbConfig.ruby, sidekiq, "-r", jobs, "-c", @concurrency.to_s, "-q", "replay",
                               "-t", "5", out: log, err: log)
      end

      def wait_ready
        deadline = Time.now + 60
        until (ready = ::Sidekiq::ProcessSet.new.count { |p| @pids.include?(p["pid"]) }) >= @pids.size
          raise Error, "only #{ready} of #{@pids.size} Sidekiq processes came up in 60s (logs in #{@log_dir})" if Time.now > deadline

          reap
          sleep 0.1
        end
      end

      # A killed process never unregisters; its entry would count as busy.
      def forget(pid)
        ::Sidekiq.redis do |r|
          r.smembers("processes").select { |id| id.split(":")[-2].to_i == pid }.each do |id|
            r.srem("processes", id)
            r.unlink(id, "#{id}:workers")
          end
        end
      end
    end
  end
end
