<?php

declare(strict_types=1);

namespace Onceonly;

use Onceonly\Exception\AnswerError;

/**
 * What a destination's answer may hold before it is stored, and how a value
 * from outside is shown (the Rust core's `onceonly::answer`; the shared cases
 * are protocol/corpus/answers.json).
 *
 * An external reference is at most 2048 bytes of UTF-8, a result (its JSON
 * text as stored) at most 65536 bytes; neither holds a control character:
 * Unicode Cc or a bidirectional control. A violation is the destination
 * breaking the protocol: the operation fails for good and nothing of the
 * answer is stored.
 */
final class Answer
{
    public const MAX_REFERENCE_BYTES = 2048;
    public const MAX_RESULT_BYTES = 65536;

    /** Unicode Cc and the bidirectional controls, as a PCRE class. */
    private const CONTROL = '[\x{0}-\x{1f}\x{7f}-\x{9f}\x{61c}\x{200e}\x{200f}\x{202a}-\x{202e}\x{2066}-\x{2069}]';

    /** Throws AnswerError unless the reference keeps the rules. */
    public static function checkReference(string $reference): void
    {
        self::check('external reference', $reference, self::MAX_REFERENCE_BYTES);
    }

    /** Throws AnswerError unless the result's JSON text keeps the rules. */
    public static function checkResult(string $text): void
    {
        self::check('result', $text, self::MAX_RESULT_BYTES);
    }

    /** Why an answer may not be stored, or null. */
    public static function broken(?string $reference, ?string $resultText): ?string
    {
        try {
            if ($reference !== null) {
                self::checkReference($reference);
            }
            if ($resultText !== null) {
                self::checkResult($resultText);
            }
        } catch (AnswerError $e) {
            return $e->getMessage();
        }
        return null;
    }

    /** $text with every control character written as an escape, for display. */
    public static function escapeControls(string $text): string
    {
        return preg_replace_callback('/' . self::CONTROL . '/u', static function (array $m): string {
            $short = ["\n" => '\\n', "\r" => '\\r', "\t" => '\\t', "\0" => '\\0'];
            if (isset($short[$m[0]])) {
                return $short[$m[0]];
            }
            $cp = mb_ord($m[0], 'UTF-8');
            return $cp < 0x100 ? sprintf('\\x%02x', $cp) : sprintf('\\u{%x}', $cp);
        }, $text) ?? $text;
    }

    private static function check(string $part, string $text, int $limit): void
    {
        $size = strlen($text);
        if ($size > $limit) {
            throw new AnswerError('too_long', "the destination's $part is $size bytes, over the limit of $limit: it breaks the protocol and is not stored");
        }
        if (!preg_match('//u', $text)) {
            throw new AnswerError('control', "the destination's $part is not UTF-8: it breaks the protocol and is not stored");
        }
        if (preg_match('/' . self::CONTROL . '/u', $text, $m, PREG_OFFSET_CAPTURE)) {
            $start = mb_substr($text, 0, 80, 'UTF-8') . (mb_strlen($text, 'UTF-8') > 80 ? '…' : '');
            throw new AnswerError('control', sprintf(
                "the destination's %s holds control character U+%04X at byte %d (\"%s\"): it breaks the protocol and is not stored",
                $part,
                mb_ord($m[0][0], 'UTF-8'),
                $m[0][1],
                self::escapeControls($start),
            ));
        }
    }
}
