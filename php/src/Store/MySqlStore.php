<?php

declare(strict_types=1);

namespace Onceonly\Store;

use Onceonly\Claim;
use Onceonly\DbUrl;
use Onceonly\Exception\DatabaseError;
use Onceonly\Exception\InvalidInput;
use Onceonly\Payload;
use Onceonly\Record;
use Onceonly\Snapshot;
use Onceonly\State;
use PDO;
use PDOException;

/**
 * Records in one MySQL or MariaDB database (tested on MariaDB 10.11), the
 * tables of crates/onceonly-mysql, with the same traps closed the same way:
 *
 * - **Affected rows.** PDO counts the rows an UPDATE *changed* unless the
 *   connection sets `PDO::MYSQL_ATTR_FOUND_ROWS` (then the rows it
 *   *matched*, as sqlx does). Every deciding statement changes the row it
 *   matches (a new token or state, and always `version = version + 1`), so
 *   the count is the same in both modes; `$foundRows` picks the mode (the
 *   tests run both).
 * - **No `UPDATE ... RETURNING`.** A claim reads the clock, inserts the
 *   record claimed (1: ours, token 1); on a duplicate key (1062) it reads
 *   the record and claims it with an update fenced on the token read (1:
 *   ours, token + 1). A take-over reads its row back in its transaction.
 * - **Strict mode** on every connection (a too-long value is refused, never
 *   cut), `time_zone = '+00:00'`, native prepares (emulated ones would send
 *   every int as a quoted string: `LIMIT '5'` fails, `NOW + '5'` is a double).
 * - **Deadlock (1213) and lock wait (1205)**: work on the store's own
 *   connection runs again from its first statement, at most 5 times; in the
 *   caller's transaction the error goes to the caller.
 *
 * Statements bind `?` by position, each file's own order (its header).
 */
final class MySqlStore extends Store
{
    public const DUP_ENTRY = 1062;
    public const LOCK_WAIT_TIMEOUT = 1205;
    public const DEADLOCK = 1213;
    public const DATA_TOO_LONG = 1406;
    public const MAX_ATTEMPTS = 5;
    private const NO_LIMIT = PHP_INT_MAX;

    /** Work run again after a deadlock or lock wait. */
    public int $retries = 0;

    public function __construct(string $url, public readonly bool $foundRows = false)
    {
        parent::__construct($url);
    }

    public function dialect(): string
    {
        return 'mysql';
    }

    /** @return array{string, ?string, ?string} PDO's DSN, user and password for a mysql:// URL */
    public static function dsn(string $url): array
    {
        $u = parse_url(preg_replace('#^mariadb://#', 'mysql://', $url));
        $db = isset($u['path']) ? ltrim(rawurldecode($u['path']), '/') : '';
        if ($u === false || !isset($u['host']) || $db === '') {
            throw new InvalidInput('a MySQL URL names a host and a database (mysql://USER@HOST/DATABASE): ' . DbUrl::redact($url));
        }
        $dsn = 'mysql:host=' . $u['host'] . (isset($u['port']) ? ';port=' . $u['port'] : '') . ";dbname=$db;charset=utf8mb4";
        return [$dsn, isset($u['user']) ? rawurldecode($u['user']) : 'root', isset($u['pass']) ? rawurldecode($u['pass']) : null];
    }

    protected function open(): PDO
    {
        [$dsn, $user, $password] = self::dsn($this->url);
        try {
            $conn = new PDO($dsn, $user, $password, [
                PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
                PDO::ATTR_EMULATE_PREPARES => false,
                PDO::ATTR_STRINGIFY_FETCHES => false,
                PDO::MYSQL_ATTR_FOUND_ROWS => $this->foundRows,
            ]);
        } catch (PDOException $e) {
            throw new DatabaseError('database ' . DbUrl::redact($this->url) . ' unreachable: ' . $e->getMessage(), 0, $e);
        }
        return $this->prepareConnection($conn);
    }

    /** @var \WeakMap<PDO, true> connections already in strict mode and UTC */
    private \WeakMap $ready;

    /** Strict mode and UTC on the connection (the caller's too: its claim and completion run there), once per connection. */
    public function prepareConnection(PDO $conn): PDO
    {
        $this->ready ??= new \WeakMap();
        if (isset($this->ready[$conn])) {
            return $conn;
        }
        $conn->setAttribute(PDO::ATTR_EMULATE_PREPARES, false);
        $conn->exec(Sql::query('mysql', 'session_strict'));
        $conn->exec(Sql::query('mysql', 'session_time_zone'));
        $mode = (string) $conn->query(Sql::query('mysql', 'session_sql_mode'))->fetchColumn();
        if (!str_contains($mode, 'STRICT_ALL_TABLES')) {
            throw new DatabaseError('cannot put the session of ' . DbUrl::redact($this->url) . " in strict mode (sql_mode is $mode)");
        }
        $this->ready[$conn] = true;
        return $conn;
    }

    public function migrate(): void
    {
        $conn = $this->open();
        $st = $conn->prepare(Sql::query('mysql', 'migrate_lock'));
        $st->execute([60]);
        if ((int) $st->fetchColumn() !== 1) {
            throw new DatabaseError('migrating ' . DbUrl::redact($this->url) . ': another process held the migration lock for 60 s');
        }
        try {
            $conn->exec(Sql::query('mysql', 'migrate_setup'));
            foreach (Sql::migrations('mysql') as [$version, $name, $sql]) {
                [, $done] = $this->run($conn, 'migrate_applied', [$version]);
                if ($done) {
                    continue;
                }
                $conn->exec($sql);
                $this->run($conn, 'migrate_record', [$version, $name]);
            }
        } catch (PDOException $e) {
            throw new DatabaseError('migrating ' . DbUrl::redact($this->url) . ': ' . $e->getMessage(), 0, $e);
        } finally {
            $conn->query(Sql::query('mysql', 'migrate_unlock'))->closeCursor();
        }
        // Tables made by hand or converted could compare keys by another
        // collation: `k`, `K` and `k ` would be one operation.
        foreach ($conn->query(Sql::query('mysql', 'identity_collations'))->fetchAll(PDO::FETCH_ASSOC) as $c) {
            if (!in_array($c['collation_name'], ['utf8mb4_nopad_bin', 'utf8mb4_0900_bin'], true)) {
                throw new DatabaseError(sprintf(
                    '%s: %s.%s compares by %s; onceonly needs utf8mb4_nopad_bin (MySQL 8: utf8mb4_0900_bin), or k, K and "k " are one key',
                    DbUrl::redact($this->url), $c['table_name'], $c['column_name'], $c['collation_name'],
                ));
            }
        }
    }

    public function claim(string $job, string $key, string $owner, Payload $payload, int $leaseMs, ?PDO $in = null): Claim|Snapshot
    {
        return $this->retried($in, function (PDO $conn) use ($job, $key, $owner, $payload, $leaseMs, $in): Claim|Snapshot {
            [, $rows] = $this->run($conn, 'now', [$this->clockOffsetMs]);
            $now = (int) $rows[0]['now'];
            $leaseUntil = $now + $leaseMs;
            // In the caller's transaction a record a plain read finds is locked
            // (get_locked.sql) before anything is written: two transactions
            // claiming it queue on the lock instead of each holding the
            // duplicate key's shared lock and deadlocking (1213) on the update.
            // A key no read finds is inserted (a locking read of a missing key
            // takes a gap lock; two such inserts deadlock).
            if ($in !== null && $this->read($conn, $job, $key, false) !== null) {
                [, $rows] = $this->run($conn, 'get_locked', [$this->clockOffsetMs, $job, $key]);
                if ($rows) {
                    return $this->claimExisting($conn, $job, $key, $owner, $payload, $now, $leaseUntil, true,
                        new Snapshot(Record::fromRow($rows[0]), (int) $rows[0]['now']));
                }
            }
            try {
                [$n] = $this->run($conn, 'claim_insert', [$job, $key, $owner, $payload->fingerprint, $payload->json, $now, $leaseUntil, $now, $now]);
                if ($n !== 1) {
                    throw new DatabaseError("claim insert of $job:$key affected $n rows");
                }
                return new Claim(1, 1, $now, $leaseUntil);
            } catch (DatabaseError $e) {
                if (self::number($e) !== self::DUP_ENTRY) {
                    throw $e;
                }
            }
            $snap = $this->read($conn, $job, $key, $in !== null);
            if ($snap === null) {
                throw new DatabaseError("$job:$key conflicted on claim but is gone (purged meanwhile?)");
            }
            return $this->claimExisting($conn, $job, $key, $owner, $payload, $now, $leaseUntil, $in !== null, $snap);
        });
    }

    /** Claims the record read, fenced on its token, when it is claimable; else the row as it stands. */
    private function claimExisting(PDO $conn, string $job, string $key, string $owner, Payload $payload, int $now, int $leaseUntil, bool $inTx, Snapshot $snap): Claim|Snapshot
    {
        $r = $snap->record;
        // Not claimable as read: no update (in the caller's transaction
        // the duplicate key left a shared lock; racing upgrades deadlock).
        if ($r->state !== State::Queued || $r->fingerprint !== $payload->fingerprint || ($r->dueAt !== null && $r->dueAt > $now)) {
            return $snap;
        }
        [$n] = $this->run($conn, 'claim_update', [$owner, $now, $leaseUntil, $now, $job, $key, $r->token, $payload->fingerprint, $now]);
        if ($this->decided($n, 'claim update')) {
            return new Claim($r->token + 1, $r->attempts + 1, $now, $leaseUntil);
        }
        return $this->read($conn, $job, $key, $inTx)
            ?? throw new DatabaseError("$job:$key conflicted on claim but is gone (purged meanwhile?)");
    }

    public function takeOver(string $job, string $key, int $staleToken, State $to, string $owner, int $leaseMs, string $reason): ?Claim
    {
        return $this->retried(null, function (PDO $conn) use ($job, $key, $staleToken, $to, $owner, $leaseMs, $reason): ?Claim {
            $conn->beginTransaction();
            try {
                [$n] = $this->run($conn, 'take_over', [$this->clockOffsetMs, $to->value, $owner, $leaseMs, $reason, $job, $key, $staleToken]);
                $claim = null;
                if ($this->decided($n, 'take over')) {
                    [, $rows] = $this->run($conn, 'take_over_read', [$job, $key, $staleToken + 1]);
                    $claim = Claim::fromRow($rows[0]);
                }
                $conn->commit();
                return $claim;
            } catch (\Throwable $e) {
                if ($conn->inTransaction()) {
                    $conn->rollBack();
                }
                throw $e;
            }
        });
    }

    public function move(OpMove $m, ?PDO $in = null): bool
    {
        return $this->retried($in, fn (PDO $conn): bool => $this->decided($this->run($conn, 'move', [
            $this->clockOffsetMs, $m->to->value, $m->externalRef, $m->result, $m->error, $m->retryAfterMs ?? 0,
            $m->jobType, $m->opKey, $m->token, $m->from->value, $m->unlessCancelRequested,
        ])[0], 'move'));
    }

    public function heartbeat(string $job, string $key, int $token, int $leaseMs): ?array
    {
        return $this->retried(null, function (PDO $conn) use ($job, $key, $token, $leaseMs): ?array {
            $conn->beginTransaction();
            try {
                [$n] = $this->run($conn, 'heartbeat', [$this->clockOffsetMs, $leaseMs, $job, $key, $token]);
                $out = null;
                if ($this->decided($n, 'heartbeat')) {
                    [, $rows] = $this->run($conn, 'heartbeat_read', [$job, $key, $token]);
                    $out = [(int) $rows[0]['lease_until'], Record::flag($rows[0]['cancel_requested'])];
                }
                $conn->commit();
                return $out;
            } catch (\Throwable $e) {
                if ($conn->inTransaction()) {
                    $conn->rollBack();
                }
                throw $e;
            }
        });
    }

    public function requestCancel(string $job, string $key, int $token): bool
    {
        return $this->retried(null, fn (PDO $conn): bool => $this->decided(
            $this->run($conn, 'request_cancel', [$this->clockOffsetMs, $job, $key, $token])[0],
            'request_cancel',
        ));
    }

    public function get(string $job, string $key, ?PDO $in = null): ?Snapshot
    {
        return $this->retried($in, fn (PDO $conn): ?Snapshot => $this->read($conn, $job, $key, false));
    }

    public function enqueue(string $job, string $key, Payload $payload, int $delayMs = 0): bool
    {
        return $this->retried(null, function (PDO $conn) use ($job, $key, $payload, $delayMs): bool {
            try {
                [$n] = $this->run($conn, 'enqueue', [$job, $key, $payload->fingerprint, $payload->json, $delayMs, $this->clockOffsetMs]);
                return $this->decided($n, 'enqueue');
            } catch (DatabaseError $e) {
                if (self::number($e) === self::DUP_ENTRY) {
                    return false;
                }
                throw $e;
            }
        });
    }

    public function audit(string $job, string $key, string $event, string $actor, int $token, ?string $from, ?string $to, ?string $detail, ?int $attempt = null, ?int $retryAfterMs = null): void
    {
        $n = $this->retried(null, fn (PDO $conn): int => $this->run($conn, 'audit', [
            $job, $key, $event, $actor, $token, $from, $to, $detail, $attempt, $retryAfterMs, $this->clockOffsetMs,
        ])[0]);
        if ($n !== 1) {
            throw new DatabaseError("audit append for $job:$key inserted $n rows");
        }
    }

    public function history(string $job, string $key): array
    {
        [, $rows] = $this->own('history', [$job, $key]);
        return array_map([\Onceonly\AuditEvent::class, 'fromRow'], $rows);
    }

    public function held(?string $job = null): array
    {
        [, $rows] = $this->own('operator_held', [$job, $job, self::NO_LIMIT, 0]);
        return array_map([Record::class, 'fromRow'], $rows);
    }

    public function stuck(?string $job = null): array
    {
        [, $rows] = $this->own('operator_stuck', [$this->clockOffsetMs, $job, $job, self::NO_LIMIT, 0]);
        return array_map([Record::class, 'fromRow'], $rows);
    }

    /** The MySQL error number of a refused statement, or null. */
    public static function number(\Throwable $e): ?int
    {
        $p = $e instanceof PDOException ? $e : $e->getPrevious();
        if ($p instanceof PDOException && isset($p->errorInfo[1])) {
            return (int) $p->errorInfo[1];
        }
        return null;
    }

    /** get.sql, or get_latest.sql (a locking read) in a caller's transaction whose snapshot may be older. */
    private function read(PDO $conn, string $job, string $key, bool $latest): ?Snapshot
    {
        [, $rows] = $this->run($conn, $latest ? 'get_latest' : 'get', [$this->clockOffsetMs, $job, $key]);
        return $rows ? new Snapshot(Record::fromRow($rows[0]), (int) $rows[0]['now']) : null;
    }

    protected function error(PDOException $e, string $what): DatabaseError
    {
        if ((int) ($e->errorInfo[1] ?? 0) === self::DATA_TOO_LONG) {
            return new DatabaseError("refused by MySQL, nothing written: {$e->getMessage()} (the value is longer than its column)", 0, $e);
        }
        return parent::error($e, $what);
    }

    /**
     * Runs $work on the caller's connection once, or on the store's own,
     * again from its first statement after a deadlock or lock wait.
     *
     * @template T
     * @param callable(PDO): T $work
     * @return T
     */
    private function retried(?PDO $in, callable $work): mixed
    {
        if ($in !== null) {
            return $work($this->prepareConnection($in));
        }
        for ($attempt = 1; ; $attempt++) {
            try {
                return $work($this->pdo());
            } catch (DatabaseError $e) {
                $n = self::number($e);
                if (($n === self::DEADLOCK || $n === self::LOCK_WAIT_TIMEOUT) && $attempt < self::MAX_ATTEMPTS) {
                    $this->retries++;
                    usleep(10_000 * $attempt);
                    continue;
                }
                if ($n === null) {
                    $this->close(); // a broken connection is not reused
                }
                throw $e;
            }
        }
    }
}
