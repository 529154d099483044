# frozen_string_literal: true

# Ships an order once, however often its job is delivered: the claim, the
# Shipment row and the completion commit in one ActiveRecord transaction.
class ShipOrder < ApplicationJob
  queue_as :shop
  guarded key: ->(order_id) { "order-#{order_id}" }, effect: :local, lease: "30s", timeout: "10s"

  def perform(order_id)
    order = Order.find(order_id)
    shipment = order.shipments.create!(carrier_ref: "parcel-#{order_id}")
    { "shipment" => shipment.id }
  end
end
