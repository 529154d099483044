# frozen_string_literal: true

require_relative "test_helper"

# protocol/corpus/answers.json, and the guard never storing an answer that
# breaks its rules (a reference too long or holding control characters, a
# result too long), whether the effect or its lookup returned it.
class AnswersTest < Minitest::Test
  include FreshStores

  ANSWERS = JSON.parse(File.read(File.join(REPO_ROOT, "protocol/corpus/answers.json")))

  def test_every_answer_case_of_the_corpus
    cases = ANSWERS["cases"]
    assert_operator cases.size, :>=, 30
    cases.each do |c|
      text = c["text"] * (c["repeat"] || 1)
      rule = begin
        c["part"] == "reference" ? Onceonly::Answer.check_reference(text) : Onceonly::Answer.check_result(text)
        nil
      rescue Onceonly::Answer::Error => e
        refute Onceonly::Answer::CONTROL.match?(e.message), c["name"]
        e.rule
      end
      c["error"].nil? ? assert_nil(rule, c["name"]) : assert_equal(c["error"], rule, c["name"])
    end
    ANSWERS["escapes"].each do |c|
      assert_equal c["shown"], Onceonly::Answer.escape_controls(c["text"]), c["text"].inspect
    end
    puts "\nanswers corpus: #{cases.size} cases, #{ANSWERS['escapes'].size} escapes"
  end

  class Answering
    def initialize(ref, result)
      @ref = ref
      @result = result
    end

    def perform(_ctx)
      Onceonly::Done.new(external_ref: @ref, result: @result)
    end

    def lookup(_ctx)
      Onceonly::Done.new(external_ref: @ref, result: @result)
    end
  end

  def test_the_guard_never_stores_an_answer_that_breaks_the_rules
    store = sqlite_store
    spec = Onceonly::JobSpec.new(job_type: "mail", effect: :keyed)
    guard = Onceonly::Guard.new(store, spec)
    [
      ["ref", Answering.new("r" * 2049, nil), "2049 bytes, over the limit of 2048"],
      ["ctl", Answering.new("a\e[2J\r\nFAKE", nil), "control character U+001B"],
      ["res", Answering.new("ok", "x" * 70_000), "result is 70002 bytes"]
    ].each do |key, effect, said|
      out = guard.run(key, { "n" => 1 }, effect)
      assert_kind_of Onceonly::Outcome::Failed, out, key
      assert_includes out.error, said, key
      r = store.op_get("mail", key).record
      assert_equal ["failed", nil, nil], [r.state, r.external_ref, r.result], key
      refute Onceonly::Answer::CONTROL.match?(r.error), key
    end
  end
end
