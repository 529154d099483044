# frozen_string_literal: true

require "onceonly/active_record"

# onceonly's tables (the stores' own SQL for this adapter); irreversible.
class CreateOnceonlyTables < Onceonly::ActiveRecord::Migration; end
