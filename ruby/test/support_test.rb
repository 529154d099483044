# frozen_string_literal: true

require_relative "test_helper"

# The one rule for a test whose server is down (Support.unavailable!, reached
# through need_server! and need_postgres!): under CI=true it fails, elsewhere
# it skips loudly; a probe that answers lets the test go on.
class SupportTest < Minitest::Test
  def with_ci(value)
    before = ENV["CI"]
    ENV["CI"] = value
    yield
  ensure
    ENV["CI"] = before
  end

  def test_a_probe_that_answers_lets_the_test_run
    ran = false
    Support.need_server!(self, "a server") { ran = true }
    assert ran
  end

  def test_a_down_server_skips_loudly_outside_ci
    with_ci(nil) do
      _, err = capture_io do
        skipped = assert_raises(Minitest::Skip) do
          Support.need_server!(self, "Redis at redis://127.0.0.1:1/0") { raise Errno::ECONNREFUSED }
        end
        assert_match(/Redis at redis:\/\/127.0.0.1:1\/0/, skipped.message)
      end
      assert_match(/!!! SKIPPED .*Redis at redis:\/\/127.0.0.1:1\/0/, err)
    end
  end

  def test_a_down_server_fails_under_ci
    with_ci("true") do
      stopped = begin
        Support.need_server!(self, "Redis at redis://127.0.0.1:1/0") { raise Errno::ECONNREFUSED }
        nil
      rescue Minitest::Skip, StandardError => e
        e
      end
      refute_nil stopped, "a down server under CI=true must stop the test"
      refute_kind_of Minitest::Skip, stopped, "skipped under CI=true: #{stopped.message}"
      assert_match(/CI=true/, stopped.message)
    end
  end
end
