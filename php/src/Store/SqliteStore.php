<?php

declare(strict_types=1);

namespace Onceonly\Store;

use Onceonly\Claim;
use Onceonly\DbUrl;
use Onceonly\Exception\DatabaseError;
use Onceonly\Exception\InvalidInput;
use Onceonly\Payload;
use Onceonly\Snapshot;
use PDO;
use PDOException;

/**
 * Records in one SQLite file (WAL), the tables of crates/onceonly-sqlite.
 *
 * SQLite before 3.42 (Debian 12 ships 3.40) has no `unixepoch('subsec')`:
 * there the store registers `onceonly_clock_ms()` on each connection it runs
 * on, reading the OS real-time clock SQLite reads, once per statement, in
 * place of the files' one clock expression (as the Python and Ruby stores).
 */
final class SqliteStore extends Store
{
    private const CLOCK_EXPR = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";
    private const BUSY_TIMEOUT_S = 30;
    private const MIGRATIONS_TABLE = 'CREATE TABLE IF NOT EXISTS onceonly_migrations (
             version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)';
    private const MIGRATION_APPLIED = 'SELECT version FROM onceonly_migrations WHERE version = ?1';
    private const MIGRATION_RECORD = "INSERT INTO onceonly_migrations (version, name, applied_at) VALUES (?1, ?2, datetime('now'))";

    /** The clock of the statement running now (ms), pinned as SQLite pins 'now'. */
    private static ?int $pinned = null;

    public readonly string $path;
    private ?bool $needsClock = null;

    public function __construct(string $url)
    {
        parent::__construct($url);
        if (!str_starts_with($url, 'sqlite://')) {
            throw new InvalidInput(DbUrl::redact($url) . ' is not a SQLite URL (sqlite://PATH or sqlite:///ABS/PATH)');
        }
        $path = explode('?', substr($url, strlen('sqlite://')), 2)[0];
        if ($path === '' || str_contains($url, ':memory:') || str_contains($url, 'mode=memory')) {
            throw new InvalidInput(DbUrl::redact($url) . ' names no file: onceonly needs a SQLite file that every worker opens');
        }
        $this->path = $path;
    }

    public function dialect(): string
    {
        return 'sqlite';
    }

    /** SQLite's clock as unixepoch('subsec') reads it: the OS real-time clock, in ms. */
    public static function clockMs(): int
    {
        return (int) floor(microtime(true) * 1000);
    }

    protected function open(): PDO
    {
        $folder = dirname($this->path);
        if (!is_dir($folder)) {
            throw new DatabaseError('database ' . DbUrl::redact($this->url) . " unreachable: folder $folder does not exist");
        }
        if (!file_exists($this->path)) {
            // 0600 whatever the umask; SQLite gives its -wal and -shm the same mode.
            $old = umask(0077);
            $f = @fopen($this->path, 'x');
            umask($old);
            if ($f !== false) {
                fclose($f);
                chmod($this->path, 0600);
            }
        }
        try {
            $conn = new PDO('sqlite:' . $this->path, null, null, [
                PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
                PDO::ATTR_TIMEOUT => self::BUSY_TIMEOUT_S,
                PDO::ATTR_STRINGIFY_FETCHES => false,
            ]);
            $conn->exec('PRAGMA journal_mode=WAL');
            $conn->exec('PRAGMA synchronous=NORMAL');
        } catch (PDOException $e) {
            throw new DatabaseError('database ' . DbUrl::redact($this->url) . ' unreachable: ' . $e->getMessage(), 0, $e);
        }
        return $this->prepareConnection($conn);
    }

    public function prepareConnection(PDO $conn): PDO
    {
        if ($this->needsClock()) {
            // Returned as a double (exact for ms): pdo_sqlite hands a PHP int
            // to sqlite3_result_int, which cuts it to 32 bits.
            $conn->sqliteCreateFunction('onceonly_clock_ms', static fn (): float => (float) (self::$pinned ??= self::clockMs()), 0);
        }
        return $conn;
    }

    private function needsClock(): bool
    {
        if ($this->needsClock === null) {
            $version = (new PDO('sqlite::memory:'))->query('SELECT sqlite_version()')->fetchColumn();
            $this->needsClock = version_compare((string) $version, '3.42.0', '<');
        }
        return $this->needsClock;
    }

    protected function statement(string $name): string
    {
        $text = Sql::query('sqlite', $name);
        return $this->needsClock() ? str_replace(self::CLOCK_EXPR, 'CAST(onceonly_clock_ms() AS INTEGER)', $text) : $text;
    }

    protected function run(PDO $conn, string $name, array $args): array
    {
        self::$pinned = null;
        return parent::run($conn, $name, $args);
    }

    protected function bind(mixed $v): array
    {
        return is_bool($v) ? [(int) $v, PDO::PARAM_INT] : parent::bind($v);
    }

    protected function allRows(): int
    {
        return -1;
    }

    public function claim(string $job, string $key, string $owner, Payload $payload, int $leaseMs, ?PDO $in = null): Claim|Snapshot
    {
        if ($in !== null) {
            return parent::claim($job, $key, $owner, $payload, $leaseMs, $in);
        }
        // As the Rust store: a plain insert for a new record (the clock bound
        // as ?8), then claim.sql for a queued one, then the row as it stands.
        $now = self::clockMs();
        [$inserted] = $this->own('claim_new', [$this->clockOffsetMs, $job, $key, $owner, $payload->fingerprint, $payload->json, $leaseMs, $now]);
        if ($inserted === 1) {
            $at = $now + $this->clockOffsetMs;
            return new Claim(1, 1, $at, $at + $leaseMs);
        }
        return parent::claim($job, $key, $owner, $payload, $leaseMs);
    }

    public function migrate(): void
    {
        $conn = $this->pdo();
        try {
            $conn->exec('BEGIN IMMEDIATE'); // the write lock: two migrating processes apply each once
            try {
                $conn->exec(self::MIGRATIONS_TABLE);
                foreach (Sql::migrations('sqlite') as [$version, $name, $sql]) {
                    $st = $conn->prepare(self::MIGRATION_APPLIED);
                    $st->execute([$version]);
                    if ($st->fetchColumn() !== false) {
                        continue;
                    }
                    $conn->exec($sql);
                    $conn->prepare(self::MIGRATION_RECORD)->execute([$version, $name]);
                }
                $conn->exec('COMMIT');
            } catch (\Throwable $e) {
                $conn->exec('ROLLBACK');
                throw $e;
            }
        } catch (PDOException $e) {
            throw new DatabaseError('migrating ' . DbUrl::redact($this->url) . ': ' . $e->getMessage(), 0, $e);
        }
    }
}
