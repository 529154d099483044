<?php

declare(strict_types=1);

namespace Onceonly\Store;

use Onceonly\DbUrl;
use Onceonly\Exception\DatabaseError;
use Onceonly\Exception\InvalidInput;
use PDO;
use PDOException;

/**
 * Records in one PostgreSQL database, in one schema (default `onceonly`),
 * the tables of crates/onceonly-postgres.
 *
 * pdo_pgsql binds every parameter untyped and cannot prepare a statement
 * whose parameter PostgreSQL cannot type (`$2 IS NULL`), so statements run
 * with PDO's emulated prepares: each `$N` of the file becomes a `?` and PDO
 * writes the value in as a quoted literal (an int as a number), which
 * PostgreSQL types from its context as it would the parameter.
 */
final class PgStore extends Store
{
    /** @var array<string, array{string, list<int>}> statement text with ?, and which $N each ? is */
    private array $rewritten = [];

    public function __construct(string $url, public readonly string $schema = 'onceonly')
    {
        parent::__construct($url);
        if (!preg_match('/^[a-z_][a-z0-9_]*$/', $schema) || strlen($schema) > 63 || str_starts_with($schema, 'pg_')) {
            throw new InvalidInput("schema \"$schema\" is not an identifier; use [a-z_][a-z0-9_]* (at most 63 bytes, not pg_...)");
        }
    }

    public function dialect(): string
    {
        return 'postgres';
    }

    protected function open(): PDO
    {
        [$dsn, $user, $password] = self::dsn($this->url);
        try {
            return new PDO($dsn, $user, $password, [
                PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
                PDO::ATTR_EMULATE_PREPARES => true,
                PDO::ATTR_STRINGIFY_FETCHES => false,
            ]);
        } catch (PDOException $e) {
            throw new DatabaseError('database ' . DbUrl::redact($this->url) . ' unreachable: ' . $e->getMessage(), 0, $e);
        }
    }

    protected function run(PDO $conn, string $name, array $args): array
    {
        $order = $this->rewrite($name)[1];
        $positional = array_map(static fn (int $n) => $args[$n - 1] ?? null, $order);
        // A caller's connection (a local effect's) keeps its own setting.
        $was = $conn->getAttribute(PDO::ATTR_EMULATE_PREPARES);
        if (!$was) {
            $conn->setAttribute(PDO::ATTR_EMULATE_PREPARES, true);
        }
        try {
            return parent::run($conn, $name, $positional);
        } finally {
            if (!$was) {
                $conn->setAttribute(PDO::ATTR_EMULATE_PREPARES, false);
            }
        }
    }

    /** @return array{string, ?string, ?string} PDO's DSN, user and password for a postgres:// URL */
    public static function dsn(string $url): array
    {
        $u = parse_url($url);
        if ($u === false || !isset($u['host'])) {
            throw new InvalidInput('not a PostgreSQL URL: ' . DbUrl::redact($url));
        }
        $parts = ['host=' . $u['host']];
        if (isset($u['port'])) {
            $parts[] = 'port=' . $u['port'];
        }
        $db = isset($u['path']) ? ltrim(rawurldecode($u['path']), '/') : '';
        if ($db !== '') {
            $parts[] = 'dbname=' . $db;
        }
        parse_str($u['query'] ?? '', $query);
        foreach (['sslmode', 'connect_timeout', 'application_name'] as $k) {
            if (isset($query[$k]) && is_string($query[$k])) {
                $parts[] = "$k=" . $query[$k];
            }
        }
        return [
            'pgsql:' . implode(';', $parts),
            isset($u['user']) ? rawurldecode($u['user']) : null,
            isset($u['pass']) ? rawurldecode($u['pass']) : null,
        ];
    }

    protected function allRows(): int
    {
        return PHP_INT_MAX;
    }

    protected function statement(string $name): string
    {
        return $this->rewrite($name)[0];
    }


    protected function bind(mixed $v): array
    {
        // Emulated: a bool would be written as the string '1'.
        return is_bool($v) ? [$v ? 'true' : 'false', PDO::PARAM_STR] : parent::bind($v);
    }

    public function migrate(): void
    {
        $conn = $this->open();
        try {
            $conn->beginTransaction();
            $this->runText($conn, 'SELECT pg_advisory_xact_lock(' . self::migrateLockKey($this->schema) . ')');
            $conn->exec($this->inSchema(Sql::strip(Sql::query('postgres', 'migrate_setup'))));
            foreach (Sql::migrations('postgres') as [$version, $migration, $sql]) {
                [, $done] = parent::run($conn, 'migrate_applied', [$version]);
                if ($done) {
                    continue;
                }
                $conn->exec($this->inSchema($sql));
                parent::run($conn, 'migrate_record', [$version, $migration]);
            }
            $conn->commit();
        } catch (PDOException $e) {
            if ($conn->inTransaction()) {
                $conn->rollBack();
            }
            throw new DatabaseError('migrating ' . DbUrl::redact($this->url) . ': ' . $e->getMessage(), 0, $e);
        }
    }

    private function runText(PDO $conn, string $sql): void
    {
        $conn->query($sql)->closeCursor();
    }

    /** FNV-1a of `onceonly.migrate:<schema>` as a signed 64-bit key, as the Rust store. */
    public static function migrateLockKey(string $schema): string
    {
        // Unsigned 64-bit arithmetic in decimal strings would be slow; GMP may
        // be missing: multiply in 16-bit limbs.
        $h = [0x2325, 0x8422, 0x9CE4, 0xCBF2]; // 0xCBF29CE484222325, low limb first
        $prime = [0x01B3, 0x0000, 0x0100, 0x0000]; // 0x100000001B3
        foreach (str_split('onceonly.migrate:' . $schema) as $ch) {
            $h[0] ^= ord($ch);
            $r = [0, 0, 0, 0];
            for ($i = 0; $i < 4; $i++) {
                $carry = 0;
                for ($j = 0; $i + $j < 4; $j++) {
                    $t = $r[$i + $j] + $h[$i] * $prime[$j] + $carry;
                    $r[$i + $j] = $t & 0xFFFF;
                    $carry = $t >> 16;
                }
            }
            $h = $r;
        }
        $hex = sprintf('%04x%04x%04x%04x', $h[3], $h[2], $h[1], $h[0]);
        if ($h[3] < 0x8000) {
            return (string) hexdec($hex);
        }
        // Negative: two's complement, printed exactly.
        $inv = sprintf('%04x%04x%04x%04x', 0xFFFF - $h[3], 0xFFFF - $h[2], 0xFFFF - $h[1], 0xFFFF - $h[0]);
        return '-' . self::decimalPlusOne($inv);
    }

    private static function decimalPlusOne(string $hex): string
    {
        // hex < 2^63: fits a PHP int
        return (string) (intdiv(hexdec(substr($hex, 0, 8)) * 0x100000000, 1) + hexdec(substr($hex, 8)) + 1);
    }

    /** @return array{string, list<int>} */
    private function rewrite(string $name): array
    {
        if (!isset($this->rewritten[$name])) {
            $sql = $this->inSchema(Sql::query('postgres', $name));
            $order = [];
            $text = preg_replace_callback('/\$(\d+)/', static function (array $m) use (&$order): string {
                $order[] = (int) $m[1];
                return '?';
            }, $sql);
            $this->rewritten[$name] = [$text, $order];
        }
        return $this->rewritten[$name];
    }

    /** $sql with every whole identifier `onceonly` replaced by the quoted schema. */
    public function inSchema(string $sql): string
    {
        return preg_replace('/(?<![A-Za-z0-9_"$])onceonly(?![A-Za-z0-9_"$])/', '"' . $this->schema . '"', $sql);
    }
}
