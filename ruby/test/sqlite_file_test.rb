# frozen_string_literal: true

require_relative "test_helper"
require "open3"
require "rbconfig"
require "tmpdir"

# The SQLite file and its -wal and -shm are created 0600 whatever the umask:
# checked in a child process whose umask is 022, as a shell usually leaves it.
class SqliteFileTest < Minitest::Test
  CHILD = <<~RUBY
    require "json"
    require "onceonly"
    path = ARGV[0]
    File.write("\#{path}.plain", "")
    store = Onceonly.connect("sqlite://\#{path}")
    store.migrate
    payload = Onceonly::Payload.parse('{"card": "4111 1111 1111 1111"}')
    store.op_enqueue(job_type: "private", op_key: "k1", fingerprint: payload.fingerprint, payload: payload.json)
    puts JSON.generate(["", "-wal", "-shm", ".plain"].to_h { |s| [s, File.stat(path + s).mode & 0o777] })
  RUBY

  def test_the_database_its_wal_and_shm_are_0600_under_umask_022
    Dir.mktmpdir do |dir|
      db = File.join(dir, "private.db")
      lib = File.expand_path("../lib", __dir__)
      out, err, status = Open3.capture3("sh", "-c", 'umask 022 && exec "$0" "$@"',
                                        RbConfig.ruby, "-I", lib, "-e", CHILD, db)
      assert status.success?, err
      modes = JSON.parse(out)
      assert_equal 0o644, modes.delete(".plain"), "the child's umask is not 022"
      assert_equal({ "" => "600", "-wal" => "600", "-shm" => "600" }, modes.transform_values { |m| m.to_s(8) })
    end
  end
end
