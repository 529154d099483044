<?php

declare(strict_types=1);

namespace Onceonly\Laravel;

use Illuminate\Contracts\Config\Repository as Config;
use Illuminate\Database\DatabaseManager;
use Onceonly\Exception\InvalidInput;
use Onceonly\Store\MySqlStore;
use Onceonly\Store\PgStore;
use Onceonly\Store\SqliteStore;
use Onceonly\Store\Store;

/**
 * The onceonly stores of a Laravel application, one per database
 * connection (config/database.php), each with a connection of its own for
 * the claims and fenced writes; a local effect's claim and completion run
 * on the application's own connection instead, in its transaction.
 */
final class Records
{
    /** @var array<string, Store> */
    private array $stores = [];

    public function __construct(private readonly Config $config, private readonly DatabaseManager $db)
    {
    }

    /** The store on database connection $name (null: the default connection). */
    public function store(?string $name = null): Store
    {
        $name ??= (string) ($this->config->get('onceonly.connection') ?? $this->config->get('database.default'));
        return $this->stores[$name] ??= self::fromConfig($name, (array) $this->config->get("database.connections.$name"));
    }

    /** The application's PDO of connection $name (a local effect's transaction). */
    public function pdo(?string $name = null): \PDO
    {
        return $this->db->connection($name ?? $this->config->get('onceonly.connection'))->getPdo();
    }

    /** @param array<string, mixed> $c a connection of config/database.php */
    public static function fromConfig(string $name, array $c): Store
    {
        $enc = static fn ($v) => rawurlencode((string) $v);
        $auth = ($c['username'] ?? '') !== '' ? $enc($c['username']) . (($c['password'] ?? '') !== '' ? ':' . $enc($c['password']) : '') . '@' : '';
        $host = ($c['host'] ?? '127.0.0.1') . (isset($c['port']) ? ':' . $c['port'] : '');
        return match ($c['driver'] ?? null) {
            'mysql', 'mariadb' => new MySqlStore("mysql://$auth$host/" . $enc($c['database'] ?? '')),
            'pgsql' => new PgStore("postgres://$auth$host/" . $enc($c['database'] ?? ''), (string) ($c['onceonly_schema'] ?? 'onceonly')),
            'sqlite' => new SqliteStore('sqlite://' . $c['database']),
            default => throw new InvalidInput("database connection \"$name\" has driver \"" . ($c['driver'] ?? '') . '"; onceonly runs on mysql, pgsql and sqlite'),
        };
    }
}
