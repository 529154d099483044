<?php

declare(strict_types=1);

namespace Onceonly;

use Onceonly\Exception\InvalidPayload;

/**
 * A payload as onceonly stores it: canonical JSON text (or null) and its
 * fingerprint, byte for byte as the Rust core writes them
 * (protocol/corpus/payloads.json is the shared test).
 *
 * Object keys sorted by code point at every level, no whitespace, strings as
 * UTF-8 with only `"`, `\` and U+0000-U+001F escaped, integers that fit i64
 * or u64 as integers, every other number as the shortest double that reads
 * back the same: fixed with at least one decimal when 1e-5 <= |x| < 1e16,
 * otherwise mantissa and exponent (`1e-6`, `1e+16`); -0 is `-0.0`. An object
 * that names a key twice is refused.
 */
final class Payload
{
    private function __construct(
        /** The canonical JSON text, or null for no payload. */
        public readonly ?string $json,
        /** The hex SHA-256 of the canonical text (of the empty string for none). */
        public readonly string $fingerprint,
    ) {
    }

    /** No payload: every delivery of the operation must then carry none. */
    public static function none(): self
    {
        return new self(null, hash('sha256', ''));
    }

    /**
     * From a PHP value: null, bool, int, float, string, a list (JSON array),
     * an array with keys or a stdClass (JSON object), a JsonSerializable.
     * Key order does not change the fingerprint. An empty array is `[]`.
     */
    public static function of(mixed $value): self
    {
        return self::fromCanonical(self::encode($value, '$'));
    }

    /** From JSON text, naming the problem when it is not JSON. */
    public static function parse(string $text): self
    {
        return self::fromCanonical(JsonCanon::canonicalize($text));
    }

    /** The payload as PHP arrays (objects as associative arrays), or null. */
    public function value(): mixed
    {
        return $this->json === null ? null : json_decode($this->json, true, 512, JSON_THROW_ON_ERROR | JSON_BIGINT_AS_STRING);
    }

    private static function fromCanonical(string $text): self
    {
        return new self($text, hash('sha256', $text));
    }

    private static function encode(mixed $value, string $where): string
    {
        if ($value === null) {
            return 'null';
        }
        if (is_bool($value)) {
            return $value ? 'true' : 'false';
        }
        if (is_int($value)) {
            return (string) $value;
        }
        if (is_float($value)) {
            return JsonCanon::float($value, $where);
        }
        if (is_string($value)) {
            if (!preg_match('//u', $value)) {
                throw new InvalidPayload("payload has a string that is not UTF-8 at $where");
            }
            return JsonCanon::string($value);
        }
        if ($value instanceof \JsonSerializable) {
            return self::encode($value->jsonSerialize(), $where);
        }
        if ($value instanceof \stdClass) {
            return self::object(get_object_vars($value), $where);
        }
        if (is_array($value)) {
            if (array_is_list($value)) {
                $parts = [];
                foreach ($value as $i => $item) {
                    $parts[] = self::encode($item, "{$where}[$i]");
                }
                return '[' . implode(',', $parts) . ']';
            }
            return self::object($value, $where);
        }
        $type = get_debug_type($value);
        throw new InvalidPayload(
            "payload has a $type at $where; only JSON values (null, bool, int, float, string, array, stdClass) can be fingerprinted"
        );
    }

    /** @param array<array-key, mixed> $members */
    private static function object(array $members, string $where): string
    {
        $pairs = [];
        foreach ($members as $key => $item) {
            $key = (string) $key;
            if (!preg_match('//u', $key)) {
                throw new InvalidPayload("payload has an object key that is not UTF-8 at $where");
            }
            $pairs[$key] = self::encode($item, "$where.$key");
        }
        return JsonCanon::joinObject($pairs);
    }
}
