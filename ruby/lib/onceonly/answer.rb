# frozen_string_literal: true

module Onceonly
  # What a destination's answer may hold before it is stored, and how a value
  # from outside is shown (the Rust core's onceonly::answer; the shared cases
  # are protocol/corpus/answers.json). An external reference is at most 2048
  # bytes of UTF-8, a result (its JSON text as stored) at most 65536 bytes;
  # neither holds a control character (Unicode Cc or a bidirectional
  # control). A violation is the destination breaking the protocol: the
  # operation fails for good and nothing of the answer is stored.
  module Answer
    MAX_REFERENCE_BYTES = 2048
    MAX_RESULT_BYTES = 65_536
    CONTROL = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/

    # An answer that breaks a rule; #rule is "too_long" or "control".
    class Error < Onceonly::Error
      attr_reader :rule

      def initialize(rule, message)
        super(message)
        @rule = rule
      end
    end

    SHORT = { "\n" => "\\n", "\r" => "\\r", "\t" => "\\t", "\0" => "\\0" }.freeze

    module_function

    def control?(char)
      CONTROL.match?(char)
    end

    # Raises Answer::Error unless the reference keeps the rules.
    def check_reference(reference)
      check("external reference", reference, MAX_REFERENCE_BYTES)
    end

    # Raises Answer::Error unless the result's JSON text keeps the rules.
    def check_result(text)
      check("result", text, MAX_RESULT_BYTES)
    end

    # Why an answer may not be stored, or nil.
    def broken(reference, result_text)
      check_reference(reference) unless reference.nil?
      check_result(result_text) unless result_text.nil?
      nil
    rescue Error => e
      e.message
    end

    # text with every control character written as an escape, for display.
    def escape_controls(text)
      text.gsub(CONTROL) do |c|
        SHORT[c] || (c.ord < 0x100 ? format("\\x%02x", c.ord) : format("\\u{%x}", c.ord))
      end
    end

    def check(part, text, limit)
      text = text.to_s.encode(Encoding::UTF_8)
      if text.bytesize > limit
        raise Error.new("too_long", "the destination's #{part} is #{text.bytesize} bytes, over the limit of " \
                                    "#{limit}: it breaks the protocol and is not stored")
      end
      at = text =~ CONTROL
      return if at.nil?

      start = text[0, 80] + (text.length > 80 ? "…" : "")
      raise Error.new("control", format("the destination's %s holds control character U+%04X at byte %d " \
                                        "(\"%s\"): it breaks the protocol and is not stored",
                                        part, text[at].ord, text[0, at].bytesize, escape_controls(start)))
    end
    private_class_method :check
  end
end
