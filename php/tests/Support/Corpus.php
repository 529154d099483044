<?php

declare(strict_types=1);

namespace Onceonly\Tests\Support;

/** The repository's shared files: protocol/corpus, protocol/*.json. */
final class Corpus
{
    public static function root(): string
    {
        return dirname(__DIR__, 3);
    }

    /** @return array<string, mixed> */
    public static function load(string $relative): array
    {
        $path = self::root() . '/' . $relative;
        $text = file_get_contents($path);
        if ($text === false) {
            throw new \RuntimeException("cannot read $path");
        }
        return json_decode($text, true, 512, JSON_THROW_ON_ERROR);
    }

    /** Says how many cases a suite ran, on stderr (PHPUnit keeps stdout for itself). */
    public static function say(string $line): void
    {
        fwrite(STDERR, "\n$line\n");
    }
}
