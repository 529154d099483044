# frozen_string_literal: true

# digest/sha2 loaded now: Digest::SHA256 autoloaded by two threads at once fails
# ("Digest::Base cannot be directly inherited"), seen under Sidekiq.
require "digest/sha2"
require "json"

module Onceonly
  # A payload as onceonly stores it: canonical JSON text plus its fingerprint,
  # byte for byte what the Rust core writes (protocol/corpus/payloads.json).
  #
  # Canonical: object keys sorted by code point at every level, no
  # whitespace, strings as UTF-8 with only `"`, `\` and U+0000-U+001F escaped,
  # integers that fit i64 or u64 as integers, every other number as the
  # shortest double that reads back the same (fixed for 1e-5 <= |x| < 1e16,
  # otherwise mantissa and exponent), -0 as -0.0.
  class Payload
    I64_MIN = -(2**63)
    U64_MAX = 2**64 - 1
    ESCAPES = { '"' => '\\"', "\\" => "\\\\", "\b" => '\\b', "\f" => '\\f',
                "\n" => '\\n', "\r" => '\\r', "\t" => '\\t' }.freeze

    attr_reader :json, :fingerprint

    # No payload: every delivery of the operation must then carry none.
    def self.none
      new(nil)
    end

    # From JSON text, naming the problem when it is not JSON.
    def self.parse(text)
      raise InvalidInput, "payload must be JSON text, got #{text.class}" unless text.is_a?(String)
      value = JSON.parse(negative_zero_as_float(text), allow_nan: false, max_nesting: false,
                                                       object_class: CheckedObject)
      if (key, where = duplicate_in(value, "$"))
        raise InvalidInput, "payload has the duplicate key #{key.to_json} in the object at #{where}; " \
                            "each key may appear once"
      end
      from_value(value)
    rescue JSON::ParserError => e
      raise InvalidInput, "payload is not valid JSON: #{e.message}"
    end

    # A Hash that, while JSON.parse fills it, notes the first key named twice
    # (in it or in an object below it) instead of keeping the last value: every
    # client refuses such a payload (protocol/corpus/payloads.json, refused).
    class CheckedObject < Hash
      # [key, path of its object below this one], or nil.
      attr_reader :duplicate

      def []=(key, value)
        return if @duplicate

        # A repeated key before anything inside its value, as the Rust core finds it.
        if key?(key)
          @duplicate = [key, ""]
        elsif (found = Payload.duplicate_in(value, ".#{key}"))
          @duplicate = found
        else
          super
        end
      end
    end

    # The first duplicate key in a parsed value, with its object's path.
    def self.duplicate_in(value, where)
      case value
      when CheckedObject
        value.duplicate && [value.duplicate[0], where + value.duplicate[1]]
      when Array
        value.each_with_index do |item, i|
          found = duplicate_in(item, "#{where}[#{i}]")
          return found if found
        end
        nil
      end
    end

    # From a Ruby value made of Hash, Array, String, Symbol (as a string),
    # Integer, Float, true, false and nil. Key order does not matter.
    def self.from_value(value)
      new(canonical(value))
    end

    # The payload a record holds, as stored.
    def self.stored(json, fingerprint)
      p = allocate
      p.instance_variable_set(:@json, json)
      p.instance_variable_set(:@fingerprint, fingerprint)
      p
    end

    def initialize(json)
      @json = json&.freeze
      @fingerprint = Digest::SHA256.hexdigest(json || "")
    end

    # The payload as a Ruby value (nil when there is none).
    def value
      @json && JSON.parse(@json, max_nesting: false)
    end

    def ==(other)
      other.is_a?(Payload) && other.json == json
    end

    # JSON's `-0` is a number Ruby's parser reads as the integer 0; the Rust
    # core reads it as the double -0.0. Rewrite that one token (outside strings).
    def self.negative_zero_as_float(text)
      text.gsub(/"(?:[^"\\]|\\.)*"|-0(?![0-9.eE])/m) { |tok| tok == "-0" ? "-0.0" : tok }
    end
    private_class_method :negative_zero_as_float

    def self.canonical(value, out = +"")
      case value
      when Hash
        pairs = value.map { |k, v| [key_text(k), v] }.sort_by(&:first)
        out << "{"
        pairs.each_with_index do |(k, v), i|
          out << "," if i.positive?
          string(k, out) << ":"
          canonical(v, out)
        end
        out << "}"
      when Array
        out << "["
        value.each_with_index do |v, i|
          out << "," if i.positive?
          canonical(v, out)
        end
        out << "]"
      when String, Symbol then string(value.to_s, out)
      when Integer then out << (value.between?(I64_MIN, U64_MAX) ? value.to_s : float(value.to_f))
      when Float then out << float(value)
      when true then out << "true"
      when false then out << "false"
      when nil then out << "null"
      else
        raise InvalidInput, "payload holds a #{value.class}, which has no JSON form; " \
                            "use hashes, arrays, strings, numbers, booleans and nil"
      end
      out
    end
    private_class_method :canonical

    def self.key_text(key)
      return key.to_s if key.is_a?(String) || key.is_a?(Symbol)

      raise InvalidInput, "payload has an object key of class #{key.class}; keys must be strings"
    end
    private_class_method :key_text

    def self.string(text, out)
      text = text.encode(Encoding::UTF_8) unless text.encoding == Encoding::UTF_8
      raise InvalidInput, "payload has a string that is not valid UTF-8: #{text.inspect}" unless text.valid_encoding?

      out << '"'
      out << text.gsub(/["\\\u0000-\u001f]/) { |c| ESCAPES[c] || format("\\u%04x", c.ord) }
      out << '"'
    rescue EncodingError => e
      raise InvalidInput, "payload has a string that cannot be UTF-8: #{e.message}"
    end
    private_class_method :string

    # The shortest double that reads back the same, written as serde_json does.
    def self.float(x)
      raise InvalidInput, "payload has #{x}, which JSON cannot hold" unless x.finite?
      return (1.0 / x).negative? ? "-0.0" : "0.0" if x.zero?

      mantissa, exp = x.abs.to_s.split("e") # Ruby's to_s is the shortest round trip
      int, frac = mantissa.split(".")
      digits = int + frac.to_s
      point = int.length + exp.to_i # where the decimal point falls in `digits`
      while digits.length > 1 && digits.start_with?("0")
        digits = digits[1..]
        point -= 1
      end
      digits = digits.sub(/0+\z/, "")
      power = point - 1
      text =
        if power >= -5 && power < 16
          if point <= 0 then "0.#{'0' * -point}#{digits}"
          elsif point >= digits.length then "#{digits}#{'0' * (point - digits.length)}.0"
          else "#{digits[0, point]}.#{digits[point..]}"
          end
        else
          lead = digits.length == 1 ? digits : "#{digits[0]}.#{digits[1..]}"
          "#{lead}e#{power.negative? ? '-' : '+'}#{power.abs}"
        end
      x.negative? ? "-#{text}" : text
    end
    private_class_method :float
  end
end
