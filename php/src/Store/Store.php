<?php

declare(strict_types=1);

namespace Onceonly\Store;

use Onceonly\AuditEvent;
use Onceonly\Claim;
use Onceonly\DbUrl;
use Onceonly\Exception\DatabaseError;
use Onceonly\Payload;
use Onceonly\Record;
use Onceonly\Snapshot;
use Onceonly\State;
use PDO;
use PDOException;
use PDOStatement;

/**
 * An operation-record store on one database, on the statements every client
 * runs (php/sql/, from the Rust stores). Each method is one statement (a
 * claim on MySQL is two) and decides by its affected-row count; the
 * decisions (who acts, which policy) are the guard's.
 *
 * `$clockOffsetMs` is added to the database's clock by every statement:
 * tests move it to expire leases without sleeping; every process sharing a
 * database in production leaves it at 0.
 *
 * A method given `$in` (a PDO the caller opened, in the caller's
 * transaction) runs there: a local effect's claim and completion commit or
 * roll back with the caller's own writes.
 */
abstract class Store
{
    public int $clockOffsetMs = 0;

    private ?PDO $conn = null;
    private ?int $pid = null;

    /** @var array<string, PDOStatement> prepared statements of the own connection */
    private array $prepared = [];

    protected function __construct(public readonly string $url)
    {
    }

    /** Opens a store by URL: mysql://, mariadb://, postgres(ql)://, sqlite://PATH. */
    public static function connect(string $url): self
    {
        return match (true) {
            str_starts_with($url, 'mysql://'), str_starts_with($url, 'mariadb://') => new MySqlStore($url),
            str_starts_with($url, 'postgres://'), str_starts_with($url, 'postgresql://') => new PgStore($url),
            str_starts_with($url, 'sqlite://') => new SqliteStore($url),
            default => throw new \Onceonly\Exception\InvalidInput('unknown database URL ' . DbUrl::redact($url) . ' (mysql://, postgres://, sqlite://)'),
        };
    }

    /** The dialect's folder in php/sql/: mysql, postgres or sqlite. */
    abstract public function dialect(): string;

    /** Creates or upgrades the tables (idempotent; the Rust store's bookkeeping). */
    abstract public function migrate(): void;

    /** A new connection, ready for the statements. */
    abstract protected function open(): PDO;

    /** Makes a caller's connection able to run the statements (SQLite's clock function). */
    public function prepareConnection(PDO $conn): PDO
    {
        return $conn;
    }

    /** The store's own connection (one per process). */
    public function pdo(): PDO
    {
        if ($this->conn === null || $this->pid !== getmypid()) {
            $this->prepared = [];
            $this->conn = null;
            $this->conn = $this->open();
            $this->pid = getmypid();
        }
        return $this->conn;
    }

    /** Closes the store's own connection; the next call opens another. */
    public function close(): void
    {
        $this->prepared = [];
        $this->conn = null;
    }

    // -- one method per statement ----------------------------------------------

    /** Claims the operation: the new claim, or the row as it stands when someone else has it. */
    public function claim(string $job, string $key, string $owner, Payload $payload, int $leaseMs, ?PDO $in = null): Claim|Snapshot
    {
        [, $rows] = $this->exec($in, 'claim', [$this->clockOffsetMs, $job, $key, $owner, $payload->fingerprint, $payload->json, $leaseMs]);
        if ($rows) {
            return Claim::fromRow($rows[0]);
        }
        return $this->existing($in, $job, $key, 'claim');
    }

    /** Moves a claim past its lease to a new token in state $to; null when another worker moved it first. */
    public function takeOver(string $job, string $key, int $staleToken, State $to, string $owner, int $leaseMs, string $reason): ?Claim
    {
        [, $rows] = $this->own('take_over', [$this->clockOffsetMs, $job, $key, $staleToken, $to->value, $owner, $leaseMs, $reason]);
        return $rows ? Claim::fromRow($rows[0]) : null;
    }

    /** One fenced transition; true when the row changed (exactly one row). */
    public function move(OpMove $m, ?PDO $in = null): bool
    {
        [$n] = $this->exec($in, 'move', [
            $this->clockOffsetMs, $m->jobType, $m->opKey, $m->token, $m->from->value, $m->to->value,
            $m->externalRef, $m->result, $m->error, $m->unlessCancelRequested, $m->retryAfterMs ?? 0,
        ]);
        return $this->decided($n, 'move');
    }

    /** Renews a live claim: [lease_until, cancel_requested], or null when the claim is no longer ours. */
    public function heartbeat(string $job, string $key, int $token, int $leaseMs): ?array
    {
        [, $rows] = $this->own('heartbeat', [$this->clockOffsetMs, $job, $key, $token, $leaseMs]);
        return $rows ? [(int) $rows[0]['lease_until'], Record::flag($rows[0]['cancel_requested'])] : null;
    }

    /** Marks a live claim cancel-requested; true when it did. */
    public function requestCancel(string $job, string $key, int $token): bool
    {
        [$n] = $this->own('request_cancel', [$this->clockOffsetMs, $job, $key, $token]);
        return $this->decided($n, 'request_cancel');
    }

    /** One record with the database's time, or null. */
    public function get(string $job, string $key, ?PDO $in = null): ?Snapshot
    {
        [, $rows] = $this->exec($in, 'get', [$this->clockOffsetMs, $job, $key]);
        return $rows ? new Snapshot(Record::fromRow($rows[0]), (int) $rows[0]['now']) : null;
    }

    /** Inserts a queued record unless one exists; true when inserted. */
    public function enqueue(string $job, string $key, Payload $payload, int $delayMs = 0): bool
    {
        [$n] = $this->own('enqueue', [$this->clockOffsetMs, $job, $key, $payload->fingerprint, $payload->json, $delayMs]);
        return $this->decided($n, 'enqueue');
    }

    /** Appends one audit event; $attempt and $retryAfterMs only on a release. */
    public function audit(
        string $job,
        string $key,
        string $event,
        string $actor,
        int $token,
        ?string $from,
        ?string $to,
        ?string $detail,
        ?int $attempt = null,
        ?int $retryAfterMs = null,
    ): void {
        [$n] = $this->own('audit', [$this->clockOffsetMs, $job, $key, $event, $actor, $token, $from, $to, $detail, $attempt, $retryAfterMs]);
        if ($n !== 1) {
            throw new DatabaseError("audit append for $job:$key inserted $n rows");
        }
    }

    /** @return list<AuditEvent> the operation's audit trail, oldest first */
    public function history(string $job, string $key): array
    {
        [, $rows] = $this->own('history', [$job, $key]);
        return array_map([AuditEvent::class, 'fromRow'], $rows);
    }

    /** @return list<Record> operations held for a person, oldest claim first */
    public function held(?string $job = null): array
    {
        [, $rows] = $this->own('operator_held', [$this->clockOffsetMs, $job, $this->allRows(), 0]);
        return array_map([Record::class, 'fromRow'], $rows);
    }

    /** @return list<Record> claims past their lease that nobody settled, oldest claim first */
    public function stuck(?string $job = null): array
    {
        [, $rows] = $this->own('operator_stuck', [$this->clockOffsetMs, $job, $this->allRows(), 0]);
        return array_map([Record::class, 'fromRow'], $rows);
    }

    /** The database's clock (plus the offset), ms since the epoch. */
    public function now(): int
    {
        [, $rows] = $this->own('now', [$this->clockOffsetMs]);
        return (int) $rows[0]['now'];
    }

    // -- running statements --------------------------------------------------------

    /** The page size that means every row, in the operator statements. */
    protected function allRows(): int
    {
        return PHP_INT_MAX;
    }

    /** The statement's text as this dialect runs it. */
    protected function statement(string $name): string
    {
        return Sql::query($this->dialect(), $name);
    }

    /**
     * Runs statement $name with $args on $conn: [affected rows, returned rows].
     *
     * @param list<mixed> $args
     * @return array{int, list<array<string, mixed>>}
     */
    protected function run(PDO $conn, string $name, array $args): array
    {
        try {
            $st = $conn === $this->conn
                ? ($this->prepared[$name] ??= $conn->prepare($this->statement($name)))
                : $conn->prepare($this->statement($name));
            foreach (array_values($args) as $i => $v) {
                $st->bindValue($i + 1, ...$this->bind($v));
            }
            $st->execute();
            $rows = $st->columnCount() > 0 ? $st->fetchAll(PDO::FETCH_ASSOC) : [];
            $n = $st->rowCount();
            $st->closeCursor();
            return [$n, $rows];
        } catch (PDOException $e) {
            throw $this->error($e, "$name.sql");
        }
    }

    /** @return array{mixed, int} the value and its PDO type */
    protected function bind(mixed $v): array
    {
        return match (true) {
            $v === null => [null, PDO::PARAM_NULL],
            is_int($v) => [$v, PDO::PARAM_INT],
            is_bool($v) => [$v, PDO::PARAM_BOOL],
            default => [(string) $v, PDO::PARAM_STR],
        };
    }

    /** The driver's error as onceonly's, the URL's password masked. */
    protected function error(PDOException $e, string $what): DatabaseError
    {
        return new DatabaseError("$what on " . DbUrl::redact($this->url) . ': ' . $e->getMessage(), 0, $e);
    }

    /**
     * @param list<mixed> $args
     * @return array{int, list<array<string, mixed>>}
     */
    protected function own(string $name, array $args): array
    {
        try {
            return $this->run($this->pdo(), $name, $args);
        } catch (DatabaseError $e) {
            $this->close(); // a broken connection is not reused
            throw $e;
        }
    }

    /**
     * @param list<mixed> $args
     * @return array{int, list<array<string, mixed>>}
     */
    protected function exec(?PDO $in, string $name, array $args): array
    {
        return $in === null ? $this->own($name, $args) : $this->run($this->prepareConnection($in), $name, $args);
    }

    protected function existing(?PDO $in, string $job, string $key, string $what): Snapshot
    {
        $snap = $this->get($job, $key, $in);
        if ($snap === null) {
            throw new DatabaseError("$job:$key conflicted on $what but is gone (purged meanwhile?)");
        }
        return $snap;
    }

    /** A deciding statement's count: 1 (it changed the row) or 0; anything else is a broken statement. */
    protected function decided(int $n, string $what): bool
    {
        if ($n !== 0 && $n !== 1) {
            throw new DatabaseError("$what changed $n rows; one operation is one row");
        }
        return $n === 1;
    }
}
