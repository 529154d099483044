<?php

declare(strict_types=1);

namespace Onceonly\Tests\Support;

use PHPUnit\Framework\TestCase;

/** The Rust CLI (`onceonly`) run as a user runs it, and a destination server it can send to. */
final class Cli
{
    public static function path(TestCase $t): string
    {
        $cli = getenv('ONCEONLY_BIN') ?: (getenv('ONCEONLY_CLI') ?: '/tmp/bin/onceonly');
        if (!is_executable($cli)) {
            $why = "no onceonly CLI at $cli (cargo build -p onceonly-cli; ONCEONLY_BIN=PATH)";
            getenv('CI') === 'true' ? $t->fail($why) : $t->markTestSkipped($why);
        }
        return $cli;
    }

    /**
     * Runs `onceonly --db URL ARGS...`: [exit code, stdout, stderr].
     *
     * @return array{int, string, string}
     */
    public static function run(TestCase $t, string $db, string ...$args): array
    {
        $cmd = array_merge([self::path($t), '--db', $db], $args);
        $p = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
        $out = stream_get_contents($pipes[1]);
        $err = stream_get_contents($pipes[2]);
        return [proc_close($p), $out, $err];
    }

    /** Runs it and fails the test unless it exits 0: its stdout. */
    public static function ok(TestCase $t, string $db, string ...$args): string
    {
        [$code, $out, $err] = self::run($t, $db, ...$args);
        $t->assertSame(0, $code, 'onceonly ' . implode(' ', $args) . " exited $code: $out$err");
        return $out;
    }

    /** @return list<array<string, mixed>> the JSON objects of --json output */
    public static function lines(string $out): array
    {
        return array_values(array_map(
            static fn (string $l) => json_decode($l, true, 512, JSON_THROW_ON_ERROR),
            array_filter(explode("\n", $out), static fn (string $l) => str_starts_with(trim($l), '{')),
        ));
    }

    /**
     * Starts the destination server: [base URL, state file, process].
     *
     * @return array{string, string, resource}
     */
    public static function destination(): array
    {
        $state = tempnam(sys_get_temp_dir(), 'laravel-dest-');
        file_put_contents($state, '{}');
        $port = self::freePort();
        $proc = proc_open(
            [PHP_BINARY, '-S', "127.0.0.1:$port", __DIR__ . '/destination_server.php'],
            [1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']],
            $pipes,
            null,
            ['DEST_STATE' => $state],
        );
        for ($i = 0; $i < 100; $i++) {
            $s = @fsockopen('127.0.0.1', $port, $errno, $errstr, 0.1);
            if ($s) {
                fclose($s);
                break;
            }
            usleep(50_000);
        }
        return ["http://127.0.0.1:$port", $state, $proc];
    }

    /** @return array<string, array{id: string, key: string, sends: int}> the destination's items */
    public static function items(string $state): array
    {
        return json_decode((string) file_get_contents($state), true) ?: [];
    }

    public static function freePort(): int
    {
        $s = stream_socket_server('tcp://127.0.0.1:0');
        $name = stream_socket_get_name($s, false);
        fclose($s);
        return (int) substr($name, strrpos($name, ':') + 1);
    }
}
