# frozen_string_literal: true

class CreateOrdersAndShipments < ActiveRecord::Migration[6.1]
  def change
    create_table :orders do |t|
      t.string :email, null: false
      t.timestamps
    end
    create_table :shipments do |t|
      t.references :order, null: false, foreign_key: true
      t.string :carrier_ref, null: false
      t.timestamps
    end
  end
end
