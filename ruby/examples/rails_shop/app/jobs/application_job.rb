# frozen_string_literal: true

class ApplicationJob < ActiveJob::Base
  include Onceonly::ActiveJob
end
