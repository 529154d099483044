# frozen_string_literal: true

require "securerandom"
require "socket"

module Onceonly
  # A new owner id, host:pid:random, as the Rust core writes it: two workers
  # in one process are still told apart.
  def self.new_owner
    host = ENV["HOSTNAME"].to_s.strip
    host = Socket.gethostname.to_s.dup.force_encoding(Encoding::UTF_8).strip if host.empty?
    host = "host" if host.empty?
    "#{host}:#{Process.pid}:#{SecureRandom.hex(4)}".encode(Encoding::UTF_8)
  end
end
