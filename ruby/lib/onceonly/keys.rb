# frozen_string_literal: true

module Onceonly
  # Identity of an operation: job type and operation key, checked the same way
  # in every client (protocol/corpus/keys.json).
  module Keys
    MAX_KEY_BYTES = 512
    MAX_JOB_TYPE_BYTES = 128
    # Unicode category Cc: a key travels in an HTTP header, logs and screens.
    CONTROL = /[\u0000-\u001f\u007f-\u009f]/.freeze

    module_function

    # Raises InvalidInput unless `job_type` is [A-Za-z0-9_.-]+ of at most 128 bytes.
    def validate_job_type!(job_type)
      raise InvalidInput, "job type must be a String, got #{job_type.class}" unless job_type.is_a?(String)
      raise InvalidInput, "job type is empty" if job_type.empty?
      if job_type.bytesize > MAX_JOB_TYPE_BYTES
        raise InvalidInput, "job type is #{job_type.bytesize} bytes, the limit is #{MAX_JOB_TYPE_BYTES}"
      end
      bad = job_type.each_char.find { |c| c !~ /\A[A-Za-z0-9_.\-]\z/ }
      if bad
        raise InvalidInput, "job type #{job_type.inspect} has #{bad.inspect}; " \
                            "only letters, digits, '_', '.' and '-' are allowed"
      end
      job_type
    end

    # Raises InvalidInput unless `op_key` is non-empty UTF-8 of at most 512
    # bytes without control characters, not beginning or ending with a space
    # (an HTTP header's value loses them: "a " would reach a destination as "a").
    def validate_op_key!(op_key)
      raise InvalidInput, "operation key must be a String, got #{op_key.class}" unless op_key.is_a?(String)
      key = op_key.encoding == Encoding::UTF_8 ? op_key : op_key.dup.force_encoding(Encoding::UTF_8)
      raise InvalidInput, "operation key is not valid UTF-8" unless key.valid_encoding?
      raise InvalidInput, "operation key is empty" if key.empty?
      if key.bytesize > MAX_KEY_BYTES
        raise InvalidInput, "operation key is #{key.bytesize} bytes, the limit is #{MAX_KEY_BYTES}"
      end
      if (at = key =~ CONTROL)
        byte = key[0, at].bytesize
        raise InvalidInput, format("operation key has the control character U+%04X at byte %d; " \
                                   "keys may not contain control characters", key[at].ord, byte)
      end
      if key.start_with?(" ") || key.end_with?(" ")
        raise InvalidInput, "operation key #{key.inspect} begins or ends with a space; an HTTP header would drop it"
      end
      key
    end

    # The key a destination dedups on, the same for every attempt: JOB_TYPE:OP_KEY.
    def idempotency_key(job_type, op_key)
      "#{job_type}:#{op_key}"
    end
  end
end
