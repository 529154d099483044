# frozen_string_literal: true

# The whole shop: a Rails 6.1 application (Debian's ruby-rails) with
# ActiveRecord, ActiveJob on Sidekiq, and one guarded job (app/jobs/ship_order.rb).
# `sidekiq -r ./app.rb` runs its jobs; `rake db:migrate` creates its tables.
$LOAD_PATH.unshift File.expand_path("../../lib", __dir__) # onceonly from this repository (or the installed gem)

require "rails"
require "active_record/railtie"
require "active_job/railtie"
require "onceonly/sidekiq" # Sidekiq, and the re-drive
require "onceonly/active_job"

module Shop
  class Application < Rails::Application
    config.root = __dir__
    config.load_defaults 6.1
    config.eager_load = true # every guarded job class loaded: the re-drive knows them all
    config.active_job.queue_adapter = :sidekiq
    config.active_job.queue_name_prefix = nil
    config.logger = ActiveSupport::Logger.new($stdout)
    config.log_level = ENV.fetch("SHOP_LOG_LEVEL", "info")
    config.active_record.dump_schema_after_migration = false
  end
end

Sidekiq.configure_server do |config|
  config.redis = { url: ENV.fetch("REDIS_URL", "redis://127.0.0.1:6379/0") }
  # Brings back a job whose Sidekiq process died holding its claim (fetch drops it).
  Onceonly::Sidekiq::Redrive.every(Integer(ENV.fetch("SHOP_REDRIVE_EVERY", "30")))
end
Sidekiq.configure_client { |config| config.redis = { url: ENV.fetch("REDIS_URL", "redis://127.0.0.1:6379/0") } }

Rails.application.initialize!
