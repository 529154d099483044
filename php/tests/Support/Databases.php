<?php

declare(strict_types=1);

namespace Onceonly\Tests\Support;

use Onceonly\Store\MySqlStore;
use Onceonly\Store\PgStore;
use Onceonly\Store\SqliteStore;
use Onceonly\Store\Store;
use PDO;
use PHPUnit\Framework\TestCase;

/**
 * Fresh databases for tests, on the machine's real servers: a MySQL/MariaDB
 * database, a PostgreSQL schema or a SQLite file per call. With CI=true an
 * unreachable server fails the test; otherwise it is skipped, saying why.
 * Names start with laravel_ (this suite's prefix on the shared servers).
 */
final class Databases
{
    public static function mysqlHost(): string
    {
        return getenv('ONCEONLY_TEST_MYSQL') ?: 'mysql://root@127.0.0.1:3306';
    }

    public static function pgHost(): string
    {
        return getenv('ONCEONLY_TEST_PG') ?: 'postgres://postgres@127.0.0.1:5432';
    }

    /** A new empty MySQL database: its URL. */
    public static function mysqlUrl(TestCase $t): string
    {
        $name = 'laravel_' . bin2hex(random_bytes(5));
        self::admin($t, 'mysql', fn (PDO $db) => $db->exec("CREATE DATABASE `$name` CHARACTER SET utf8mb4"));
        if (!getenv('ONCEONLY_KEEP_DBS')) {
            register_shutdown_function(static function () use ($name): void {
                [$dsn, $user, $pass] = MySqlStore::dsn(self::mysqlHost() . '/mysql');
                (new PDO($dsn, $user, $pass))->exec("DROP DATABASE IF EXISTS `$name`");
            });
        }
        return self::mysqlHost() . "/$name";
    }

    public static function mysql(TestCase $t, bool $foundRows = false): MySqlStore
    {
        $store = new MySqlStore(self::mysqlUrl($t), $foundRows);
        $store->migrate();
        return $store;
    }

    /** The PostgreSQL database the suite uses (created once), its URL. */
    public static function pgUrl(TestCase $t): string
    {
        $db = 'laravel_php';
        self::admin($t, 'pg', function (PDO $pg) use ($db) {
            if (!$pg->query("SELECT 1 FROM pg_database WHERE datname = '$db'")->fetchColumn()) {
                try {
                    $pg->exec("CREATE DATABASE $db");
                } catch (\PDOException) {
                    // created meanwhile by a parallel run
                }
            }
        });
        return self::pgHost() . "/$db";
    }

    /** A store in a fresh schema of the suite's PostgreSQL database. */
    public static function pg(TestCase $t): PgStore
    {
        $schema = 'laravel_' . bin2hex(random_bytes(5));
        $store = new PgStore(self::pgUrl($t), $schema);
        if (!getenv('ONCEONLY_KEEP_DBS')) {
            register_shutdown_function(static function () use ($store, $schema): void {
                $store->pdo()->exec("DROP SCHEMA IF EXISTS \"$schema\" CASCADE");
            });
        }
        $store->migrate();
        return $store;
    }

    public static function sqlite(TestCase $t): SqliteStore
    {
        $dir = sys_get_temp_dir() . '/laravel-php-' . bin2hex(random_bytes(5));
        mkdir($dir);
        $store = new SqliteStore("sqlite://$dir/onceonly.db");
        $store->migrate();
        return $store;
    }

    public static function of(TestCase $t, string $kind): Store
    {
        return match ($kind) {
            'mysql' => self::mysql($t),
            'mysql-found-rows' => self::mysql($t, true),
            'postgres' => self::pg($t),
            'sqlite' => self::sqlite($t),
        };
    }

    /** Runs $f on an admin connection, or skips (fails under CI=true) when the server is unreachable. */
    public static function admin(TestCase $t, string $server, callable $f): mixed
    {
        try {
            if ($server === 'mysql') {
                [$dsn, $user, $pass] = MySqlStore::dsn(self::mysqlHost() . '/mysql');
            } else {
                [$dsn, $user, $pass] = PgStore::dsn(self::pgHost() . '/postgres');
            }
            $db = new PDO($dsn, $user, $pass, [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION, PDO::ATTR_TIMEOUT => 5]);
        } catch (\PDOException $e) {
            $why = "$server unreachable: {$e->getMessage()}";
            if (getenv('CI') === 'true') {
                $t->fail("$why (CI=true: an unreachable server is a failure)");
            }
            $t->markTestSkipped($why);
        }
        return $f($db);
    }
}
