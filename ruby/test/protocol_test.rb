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

  TABLE["cancel_unsent"].each do |row|
    define_method("test_cancel_unsent_#{row['attempts']}_#{row['looked_up']}") do
      assert_equal TO.fetch(row["move"]), Onceonly::Protocol.cancel_unsent(row["attempts"], row["looked_up"]), row.inspect
    end
  end
end
