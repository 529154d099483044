# frozen_string_literal: true

module Onceonly
  VERSION = "0.1.0"
end
