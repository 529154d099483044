# frozen_string_literal: true

require_relative "test_helper"
require "rbconfig"

# The shared cross-language corpus (protocol/corpus), run as every client runs it.
class CorpusTest < Minitest::Test
  PAYLOADS = JSON.parse(File.read(File.join(REPO_ROOT, "protocol/corpus/payloads.json")))
  KEYS = JSON.parse(File.read(File.join(REPO_ROOT, "protocol/corpus/keys.json")))
  DB_URLS = JSON.parse(File.read(File.join(REPO_ROOT, "protocol/corpus/db_urls.json")))

  def test_database_urls_are_shown_as_the_corpus_says
    assert_operator DB_URLS["cases"].size, :>=, 20
    DB_URLS["cases"].each do |c|
      assert_equal c["shown"], Onceonly.redact(c["url"]), c["name"]
    end
  end

  def test_every_payload_case_is_canonical_byte_for_byte_with_its_fingerprint
    assert_operator PAYLOADS["cases"].size, :>=, 40
    PAYLOADS["cases"].each do |c|
      payload = Onceonly::Payload.parse(c["input"])
      assert_equal c["canonical"], payload.json, c["name"]
      assert_equal c["fingerprint"], payload.fingerprint, c["name"]
      assert_equal Encoding::UTF_8, payload.json.encoding, c["name"]
    end
  end

  def test_a_parsed_canonical_payload_is_its_own_canonical_form
    PAYLOADS["cases"].each do |c|
      again = Onceonly::Payload.from_value(Onceonly::Payload.parse(c["canonical"]).value)
      # -0 as a Ruby value is the float -0.0, which stays -0.0.
      assert_equal c["canonical"], again.json, c["name"]
    end
  end

  def test_a_key_named_twice_is_refused_naming_it
    assert_operator PAYLOADS["refused"].size, :>=, 5
    PAYLOADS["refused"].each do |c|
      err = assert_raises(Onceonly::InvalidInput, c["name"]) { Onceonly::Payload.parse(c["input"]) }
      assert_includes err.message, "duplicate key #{c['key'].to_json} in the object at #{c['object']}", c["name"]
    end
  end

  def test_no_payload_fingerprints_the_empty_string
    assert_nil Onceonly::Payload.none.json
    assert_equal PAYLOADS["none"]["fingerprint"], Onceonly::Payload.none.fingerprint
  end

  def test_ruby_values_with_symbol_keys_fingerprint_as_their_json
    assert_equal Onceonly::Payload.parse('{"a":1,"b":[true,null]}').fingerprint,
                 Onceonly::Payload.from_value({ b: [true, nil], a: 1 }).fingerprint
  end

  def test_job_types
    KEYS["job_types"]["valid"].each { |t| assert_equal t, Onceonly::Keys.validate_job_type!(t) }
    KEYS["job_types"]["invalid"].each do |t|
      assert_raises(Onceonly::InvalidInput, t.inspect) { Onceonly::Keys.validate_job_type!(t) }
    end
  end

  def test_op_keys
    KEYS["op_keys"]["valid"].each { |k| assert_equal k, Onceonly::Keys.validate_op_key!(k) }
    KEYS["op_keys"]["invalid"].each do |k|
      assert_raises(Onceonly::InvalidInput, k.inspect) { Onceonly::Keys.validate_op_key!(k) }
    end
  end

  def test_control_characters_are_named_with_their_position
    err = assert_raises(Onceonly::InvalidInput) { Onceonly::Keys.validate_op_key!("ab\u0085c") }
    assert_match(/control character U\+0085 at byte 2/, err.message)
  end

  def test_idempotency_keys
    KEYS["idempotency_keys"].each do |c|
      assert_equal c["idempotency_key"], Onceonly::Keys.idempotency_key(c["job_type"], c["op_key"])
    end
  end

  # Digest::SHA256 left to Digest's lazy loading failed under Sidekiq when two
  # threads fingerprinted first at once; onceonly loads it up front.
  def test_sha256_is_loaded_with_onceonly_not_on_first_use
    lib = File.expand_path("../lib", __dir__)
    assert system(RbConfig.ruby, "-I", lib, "-e",
                  'require "onceonly"; exit(Digest.constants(false).include?(:SHA256) ? 0 : 1)')
  end

  def test_bad_payloads_name_the_problem
    assert_match(/not valid JSON/, assert_raises(Onceonly::InvalidInput) { Onceonly::Payload.parse("{nope") }.message)
    assert_match(/Time/, assert_raises(Onceonly::InvalidInput) { Onceonly::Payload.from_value({ "t" => Time.now }) }.message)
    assert_match(/JSON cannot hold/, assert_raises(Onceonly::InvalidInput) { Onceonly::Payload.from_value([Float::NAN]) }.message)
  end
end
