# frozen_string_literal: true

class Order < ApplicationRecord
  has_many :shipments

  # Enqueued once the order is committed, so the job never reads an order
  # that is not there (Rails 6.1 has no enqueue_after_transaction_commit);
  # an order rolled back never enqueues its job.
  after_create_commit { ShipOrder.perform_later(id) }
end
