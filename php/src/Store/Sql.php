<?php

declare(strict_types=1);

namespace Onceonly\Store;

use Onceonly\Exception\DatabaseError;

/**
 * The stores' statements and migrations, read from php/sql/ (copied from the
 * Rust stores by tools/sync-sql; CI fails when a copy differs). Whole-line
 * `--` comments are dropped: PDO's placeholder scanner would count a `?`
 * inside one.
 *
 * @internal
 */
final class Sql
{
    /** @var array<string, string> */
    private static array $cache = [];

    public static function dir(): string
    {
        return dirname(__DIR__, 2) . '/sql';
    }

    public static function query(string $dialect, string $name): string
    {
        return self::$cache["$dialect/$name"] ??= self::strip(self::read(self::dir() . "/$dialect/queries/$name.sql"));
    }

    /** @return list<array{int, string, string}> version, name, SQL text, in order */
    public static function migrations(string $dialect): array
    {
        $out = [];
        foreach (glob(self::dir() . "/$dialect/migrations/*.sql") ?: [] as $path) {
            if (!preg_match('/^(\d+)_(.+)\.sql$/', basename($path), $m)) {
                continue;
            }
            $out[] = [(int) $m[1], $m[2], self::read($path)];
        }
        usort($out, static fn ($a, $b) => $a[0] <=> $b[0]);
        return $out;
    }

    /** The SQL without its whole-line comments. */
    public static function strip(string $sql): string
    {
        $lines = array_filter(explode("\n", $sql), static fn ($l) => !str_starts_with(ltrim($l), '--'));
        return trim(implode("\n", $lines));
    }

    private static function read(string $path): string
    {
        $text = @file_get_contents($path);
        if ($text === false) {
            throw new DatabaseError("cannot read $path (run tools/sync-sql)");
        }
        return $text;
    }
}
