# frozen_string_literal: true

require "minitest/autorun"
require "json"
require_relative "../lib/onceonly"

# protocol/corpus/timing.json: a refused start reads the same in every client.
class TimingCorpusTest < Minitest::Test
  CORPUS = JSON.parse(File.read(File.expand_path("../../protocol/corpus/timing.json", __dir__)))
  CASES = CORPUS["cases"].select { |c| c["clients"].include?("ruby") }

  # "1m 30s" as the corpus writes durations: the sum of its parts.
  def ms(text)
    text&.split&.sum { |part| Onceonly::Duration.ms(part) }
  end

  def spec(input)
    Onceonly::JobSpec.new(job_type: input["job"], effect: :keyed, lease: "#{ms(input['lease'])}ms",
                          timeout: "#{ms(input['timeout'])}ms",
                          heartbeat: input["heartbeat"] && "#{ms(input['heartbeat'])}ms",
                          redelivery_timeout: input["redelivery_timeout"] && "#{ms(input['redelivery_timeout'])}ms",
                          lock_lifetime: input["lock_lifetime"] && "#{ms(input['lock_lifetime'])}ms",
                          redelivery_setting: input.fetch("redelivery_setting", "redelivery_timeout"))
  end

  def test_refusals_read_as_the_corpus_says
    assert_operator CASES.size, :>=, 12
    CASES.each do |c|
      s = spec(c["input"])
      rules = s.broken_timing_rules(shutdown_timeout_ms: ms(c["input"]["shutdown_timeout"]))
      assert_equal c["rules"], Onceonly::Timing.lines(s.job_type, rules), c["name"]
      refused = Onceonly::Timing.refusal(s.job_type, rules)
      c["refused"] ? assert_equal(c["refused"], refused, c["name"]) : assert_nil(refused, c["name"])
      next if c["input"]["shutdown_timeout"]

      if c["refused"]
        assert_equal c["refused"], assert_raises(Onceonly::TimingError) { s.validate! }.message, c["name"]
      else
        s.validate!
      end
    end
    puts "timing corpus: #{CASES.size} of #{CORPUS['cases'].size} cases run by Ruby"
  end
end
