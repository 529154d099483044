# frozen_string_literal: true

require_relative "test_helper"

# The client's policy and cancel rule against protocol/transitions.json, the
# table written from the Rust definition: a rule changed in Rust fails here
# until it is ported (the guard takes its moves from Onceonly::Protocol).
class ProtocolTest < Minitest::Test
  TABLE = JSON.parse(File.read(File.join(REPO_ROOT, "protocol", "transitions.json")))
  TO = TABLE["transitions"].to_h { |t| [t["name"], t["to"]] }

  def self.policy_of(row)
    row["policy"]&.tr("-", "_")&.to_sym
  end

  def test_the_states_are_the_protocol_s
    assert_equal TABLE["states"].sort, Onceonly::STATES.sort
  end

  def test_the_policy_table_covers_every_kind_and_policy_this_client_knows
    covered = TABLE["policy"].map { |r| [r["kind"].to_sym, self.class.policy_of(r)] }.uniq.sort_by(&:to_s)
    known = (Onceonly::EFFECT_KINDS - [:opaque]).map { |k| [k, nil] } +
            Onceonly::STALE_POLICIES.map { |p| [:opaque, p] }
    assert_equal known.sort_by(&:to_s), covered
  end

  TABLE["policy"].each do |row|
    define_method("test_policy_#{row['kind']}_#{row['policy'] || 'none'}_#{row['attempts']}") do
      settle = Onceonly::Protocol.policy(row["kind"].to_sym, self.class.policy_of(row), row["attempts"])
      assert_equal row["settle"], settle.to_s
      assert_equal row["take_over_to"], Onceonly::Protocol.take_over_to(settle)
      assert_equal TO.fetch(row["owner_move"]), Onceonly::Protocol.owner_move(settle), "the owner's move is #{row['owner_move']}"
    end
  end

  OWNER_MOVE_RULES = TABLE["transitions"].select { |t| t["by"] == "owner" && t["statement"] == "move" }

  def test_every_owner_move_of_the_protocol_is_the_client_s
    assert_equal OWNER_MOVE_RULES.map { |t| t["name"] }.sort, Onceonly::Protocol::OWNER_MOVES.keys.sort
  end

  OWNER_MOVE_RULES.each do |rule|
    define_method("test_owner_move_#{rule['name']}_has_the_protocol_s_states_and_fences") do
      assert_equal "matches", rule["token"] # owner_op always carries the claim's token
      op = Onceonly::Protocol.owner_op(rule["name"], job_type: "job", op_key: "key", token: 7)
      assert_equal [rule["from"], rule["to"], 7], [op[:from], op[:to], op[:token]]
      assert_equal rule["cancel"] == "not_requested", op[:unless_cancel_requested]
    end
  end

  TABLE["cancel_unsent"].each do |row|
    define_method("test_cancel_unsent_#{row['attempts']}_#{row['looked_up']}") do
      assert_equal TO.fetch(row["move"]), Onceonly::Protocol.cancel_unsent(row["attempts"], row["looked_up"]), row.inspect
    end
  end

  AUDIT_ROWS = TABLE["audit_events"].to_h { |e| [e["name"], e] }

  def test_every_audit_event_this_client_writes_is_the_protocol_s
    Onceonly::Protocol::AUDIT_EVENTS.each do |name, after|
      assert AUDIT_ROWS.key?(name), "#{name} is not an audit event of the protocol"
      assert_empty after - AUDIT_ROWS[name]["after"], name
    end
  end

  def test_the_release_events_are_the_protocol_s
    retry_row = AUDIT_ROWS.fetch(Onceonly::Protocol::RETRY)
    assert_equal [["release"], true], [retry_row["after"], retry_row["attempt"]]
    # The only other release event is a relay's shutdown release, which this client has no path to.
    releases = AUDIT_ROWS.select { |_, e| e["after"].include?("release") && e["on"] == "moved" }.keys
    assert_equal [Onceonly::Protocol::RETRY, "released"].sort, releases.sort
  end
end
