<?php

declare(strict_types=1);

namespace Onceonly;

use Onceonly\Exception\InvalidPayload;

/**
 * JSON text read as the Rust core reads it and written canonically in one
 * pass (see Payload): big integers as doubles, -0 as -0.0, an object naming
 * a key twice refused with the key and the object's path. PHP's json_decode
 * keeps the last of two equal keys and turns big integers into floats or
 * strings, so the text is read here instead.
 *
 * @internal
 */
final class JsonCanon
{
    private const I64_MIN = '9223372036854775808';
    private const U64_MAX = '18446744073709551615';

    private int $at = 0;
    private readonly int $end;

    private function __construct(private readonly string $text)
    {
        $this->end = strlen($text);
    }

    /** The canonical text of JSON text. */
    public static function canonicalize(string $text): string
    {
        if (!preg_match('//u', $text)) {
            throw new InvalidPayload('payload is not valid JSON: it is not UTF-8');
        }
        $p = new self($text);
        $p->space();
        $out = $p->value('$');
        $p->space();
        if ($p->at !== $p->end) {
            $p->fail('extra data after the value');
        }
        return $out;
    }

    /** A string as canonical JSON: only `"`, `\` and U+0000-U+001F escaped. */
    public static function string(string $s): string
    {
        static $map = null;
        if ($map === null) {
            $map = ['"' => '\\"', '\\' => '\\\\', "\x08" => '\\b', "\f" => '\\f', "\n" => '\\n', "\r" => '\\r', "\t" => '\\t'];
            for ($c = 0; $c < 0x20; $c++) {
                $map[chr($c)] ??= sprintf('\\u%04x', $c);
            }
        }
        return '"' . strtr($s, $map) . '"';
    }

    /** A double as the shortest text that reads back the same, laid out as the Rust core does. */
    public static function float(float $x, string $where): string
    {
        if (is_nan($x) || is_infinite($x)) {
            $shown = is_nan($x) ? 'NaN' : ($x > 0 ? 'infinity' : '-infinity');
            throw new InvalidPayload("payload has $shown at $where; JSON has no NaN or infinity");
        }
        if ($x == 0.0) {
            return (fdiv(1.0, $x) < 0) ? '-0.0' : '0.0';
        }
        $sign = $x < 0 ? '-' : '';
        $abs = abs($x);
        // The fewest significant digits that read back the same double.
        for ($p = 0; $p <= 17; $p++) {
            $sci = sprintf('%.' . $p . 'e', $abs);
            if ((float) $sci === $abs) {
                break;
            }
        }
        [$mantissa, $exp] = explode('e', $sci);
        $digits = rtrim(str_replace('.', '', $mantissa), '0');
        $exp = (int) $exp;
        if ($digits === '') {
            $digits = '0';
        }
        if ($abs >= 1e-5 && $abs < 1e16) {
            if ($exp >= 0) {
                $whole = str_pad(substr($digits, 0, $exp + 1), $exp + 1, '0');
                $frac = substr($digits, $exp + 1);
                $frac = $frac === '' ? '0' : $frac;
            } else {
                $whole = '0';
                $frac = str_repeat('0', -$exp - 1) . $digits;
            }
            return "$sign$whole.$frac";
        }
        $m = $digits[0] . (strlen($digits) > 1 ? '.' . substr($digits, 1) : '');
        return $sign . $m . 'e' . ($exp >= 0 ? '+' : '-') . abs($exp);
    }

    /**
     * An object from its members' canonical texts, keys sorted by code point
     * (UTF-8 byte order is code point order).
     *
     * @param array<array-key, string> $pairs
     */
    public static function joinObject(array $pairs): string
    {
        $keys = array_map('strval', array_keys($pairs));
        sort($keys, SORT_STRING);
        $parts = [];
        foreach ($keys as $k) {
            $parts[] = self::string($k) . ':' . $pairs[$k];
        }
        return '{' . implode(',', $parts) . '}';
    }

    private function value(string $where): string
    {
        if ($this->at >= $this->end) {
            $this->fail('the text ends where a value should be');
        }
        $c = $this->text[$this->at];
        switch ($c) {
            case '{':
                return $this->object($where);
            case '[':
                return $this->array($where);
            case '"':
                return self::string($this->stringValue($where));
        }
        foreach (['true', 'false', 'null'] as $word) {
            if (substr_compare($this->text, $word, $this->at, strlen($word)) === 0) {
                $this->at += strlen($word);
                return $word;
            }
        }
        foreach (['NaN', 'Infinity', '-Infinity'] as $word) {
            if (substr_compare($this->text, $word, $this->at, strlen($word)) === 0) {
                throw new InvalidPayload("payload is not valid JSON: $word is not a JSON value");
            }
        }
        if (!preg_match('/\G-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/', $this->text, $m, 0, $this->at)) {
            $this->fail('expected a value');
        }
        $this->at += strlen($m[0]);
        return self::number($m[0], isset($m[1]) && $m[1] !== '' || isset($m[2]) && $m[2] !== '', $where);
    }

    private static function number(string $text, bool $fractional, string $where): string
    {
        if (!$fractional) {
            $negative = $text[0] === '-';
            $digits = $negative ? substr($text, 1) : $text;
            if ($negative && $digits === '0') {
                return '-0.0';
            }
            $limit = $negative ? self::I64_MIN : self::U64_MAX;
            if (strlen($digits) < strlen($limit) || (strlen($digits) === strlen($limit) && strcmp($digits, $limit) <= 0)) {
                return $text;
            }
        }
        $x = (float) $text;
        if (is_infinite($x)) {
            throw new InvalidPayload("payload has a number too large for a double at $where");
        }
        return self::float($x, $where);
    }

    private function object(string $where): string
    {
        $this->at++; // {
        $pairs = [];
        $this->space();
        if ($this->peek() === '}') {
            $this->at++;
            return '{}';
        }
        while (true) {
            $this->space();
            if ($this->peek() !== '"') {
                $this->fail('expected a string as an object key');
            }
            $key = $this->stringValue($where);
            if (array_key_exists($key, $pairs)) {
                $shown = json_encode($key, JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES);
                throw new InvalidPayload("payload has the duplicate key $shown in the object at $where; each key may appear once");
            }
            $this->space();
            if ($this->peek() !== ':') {
                $this->fail("expected ':' after an object key");
            }
            $this->at++;
            $this->space();
            $pairs[$key] = $this->value("$where.$key");
            $this->space();
            $c = $this->peek();
            $this->at++;
            if ($c === '}') {
                return self::joinObject($pairs);
            }
            if ($c !== ',') {
                $this->at--;
                $this->fail("expected ',' or '}' in an object");
            }
        }
    }

    private function array(string $where): string
    {
        $this->at++; // [
        $items = [];
        $this->space();
        if ($this->peek() === ']') {
            $this->at++;
            return '[]';
        }
        while (true) {
            $this->space();
            $items[] = $this->value($where . '[' . count($items) . ']');
            $this->space();
            $c = $this->peek();
            $this->at++;
            if ($c === ']') {
                return '[' . implode(',', $items) . ']';
            }
            if ($c !== ',') {
                $this->at--;
                $this->fail("expected ',' or ']' in an array");
            }
        }
    }

    /** A JSON string's value (the cursor on its opening quote), as UTF-8. */
    private function stringValue(string $where): string
    {
        $this->at++; // "
        $out = '';
        while (true) {
            $run = strcspn($this->text, "\"\\", $this->at);
            $chunk = substr($this->text, $this->at, $run);
            if (preg_match('/[\x00-\x1f]/', $chunk)) {
                $this->fail('a control character inside a string must be escaped');
            }
            $out .= $chunk;
            $this->at += $run;
            if ($this->at >= $this->end) {
                $this->fail('a string is not closed');
            }
            $c = $this->text[$this->at++];
            if ($c === '"') {
                return $out;
            }
            $e = $this->text[$this->at++] ?? '';
            $simple = ['"' => '"', '\\' => '\\', '/' => '/', 'b' => "\x08", 'f' => "\f", 'n' => "\n", 'r' => "\r", 't' => "\t"];
            if (isset($simple[$e])) {
                $out .= $simple[$e];
                continue;
            }
            if ($e !== 'u') {
                $this->fail('an unknown escape in a string');
            }
            $cp = $this->hex4();
            if ($cp >= 0xD800 && $cp <= 0xDBFF) {
                if (substr_compare($this->text, '\\u', $this->at, 2) !== 0) {
                    $this->loneSurrogate($where);
                }
                $this->at += 2;
                $low = $this->hex4();
                if ($low < 0xDC00 || $low > 0xDFFF) {
                    $this->loneSurrogate($where);
                }
                $cp = 0x10000 + (($cp - 0xD800) << 10) + ($low - 0xDC00);
            } elseif ($cp >= 0xDC00 && $cp <= 0xDFFF) {
                $this->loneSurrogate($where);
            }
            $out .= self::utf8($cp);
        }
    }

    private static function utf8(int $cp): string
    {
        if ($cp < 0x80) {
            return chr($cp);
        }
        if ($cp < 0x800) {
            return chr(0xC0 | ($cp >> 6)) . chr(0x80 | ($cp & 0x3F));
        }
        if ($cp < 0x10000) {
            return chr(0xE0 | ($cp >> 12)) . chr(0x80 | (($cp >> 6) & 0x3F)) . chr(0x80 | ($cp & 0x3F));
        }
        return chr(0xF0 | ($cp >> 18)) . chr(0x80 | (($cp >> 12) & 0x3F)) . chr(0x80 | (($cp >> 6) & 0x3F)) . chr(0x80 | ($cp & 0x3F));
    }

    private function hex4(): int
    {
        $h = substr($this->text, $this->at, 4);
        if (strlen($h) !== 4 || !ctype_xdigit($h)) {
            $this->fail('a \\u escape needs four hex digits');
        }
        $this->at += 4;
        return (int) hexdec($h);
    }

    private function loneSurrogate(string $where): never
    {
        throw new InvalidPayload("payload has a lone surrogate in a string at $where; it is not UTF-8");
    }

    private function peek(): string
    {
        return $this->text[$this->at] ?? '';
    }

    private function space(): void
    {
        $this->at += strspn($this->text, " \t\n\r", $this->at);
    }

    private function fail(string $why): never
    {
        throw new InvalidPayload("payload is not valid JSON: $why (at byte {$this->at})");
    }
}
