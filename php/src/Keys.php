<?php

declare(strict_types=1);

namespace Onceonly;

use Onceonly\Exception\InvalidKey;

/** Identity of an operation: job type and operation key, checked as every client does (protocol/corpus/keys.json). */
final class Keys
{
    public const MAX_KEY_BYTES = 512;
    public const MAX_JOB_TYPE_BYTES = 128;

    /** Throws InvalidKey unless $jobType is [A-Za-z0-9_.-]+ of at most 128 bytes. */
    public static function validateJobType(string $jobType): string
    {
        if ($jobType === '') {
            throw new InvalidKey('job type is empty');
        }
        if (strlen($jobType) > self::MAX_JOB_TYPE_BYTES) {
            throw new InvalidKey(sprintf('job type is %d bytes, the limit is %d', strlen($jobType), self::MAX_JOB_TYPE_BYTES));
        }
        if (preg_match('/[^A-Za-z0-9_.\-]/', $jobType, $m)) {
            throw new InvalidKey(sprintf(
                "job type %s has %s; only letters, digits, '_', '.' and '-' are allowed",
                json_encode($jobType, JSON_INVALID_UTF8_SUBSTITUTE | JSON_UNESCAPED_UNICODE),
                Answer::escapeControls($m[0]),
            ));
        }
        return $jobType;
    }

    /**
     * Throws InvalidKey unless $opKey is non-empty UTF-8 of at most 512 bytes
     * without control characters (Unicode Cc), not beginning or ending with a
     * space: it travels in an HTTP header (whose value loses its end spaces),
     * logs and screens.
     */
    public static function validateOpKey(string $opKey): string
    {
        if (!preg_match('//u', $opKey)) {
            throw new InvalidKey('operation key is not valid UTF-8');
        }
        if ($opKey === '') {
            throw new InvalidKey('operation key is empty');
        }
        if (strlen($opKey) > self::MAX_KEY_BYTES) {
            throw new InvalidKey(sprintf('operation key is %d bytes, the limit is %d', strlen($opKey), self::MAX_KEY_BYTES));
        }
        if (preg_match('/[\x{0}-\x{1f}\x{7f}-\x{9f}]/u', $opKey, $m, PREG_OFFSET_CAPTURE)) {
            throw new InvalidKey(sprintf(
                'operation key has the control character U+%04X at byte %d; keys may not contain control characters',
                mb_ord($m[0][0], 'UTF-8'),
                $m[0][1],
            ));
        }
        if ($opKey[0] === ' ' || $opKey[-1] === ' ') {
            throw new InvalidKey(sprintf(
                'operation key %s begins or ends with a space; an HTTP header would drop it',
                json_encode($opKey, JSON_UNESCAPED_UNICODE),
            ));
        }
        return $opKey;
    }

    /** The key a destination dedups on, the same for every attempt: JOB_TYPE:OP_KEY. */
    public static function idempotencyKey(string $jobType, string $opKey): string
    {
        return "$jobType:$opKey";
    }
}
