<?php

declare(strict_types=1);

namespace Onceonly;

/** One operation record as read (times in ms on the database's clock). */
final class Record
{
    public function __construct(
        public readonly string $jobType,
        public readonly string $opKey,
        public readonly State $state,
        public readonly int $token,
        public readonly ?string $owner,
        public readonly int $attempts,
        public readonly string $fingerprint,
        public readonly ?string $payload,
        public readonly ?string $externalRef,
        public readonly ?string $result,
        public readonly bool $cancelRequested,
        public readonly ?string $error,
        public readonly ?int $dueAt,
        public readonly ?int $claimedAt,
        public readonly ?int $leaseUntil,
        public readonly int $createdAt,
        public readonly int $updatedAt,
        public readonly ?int $completedAt,
    ) {
    }

    /** @param array<string, mixed> $row a row of get.sql (any store) */
    public static function fromRow(array $row): self
    {
        $int = static fn ($v): ?int => $v === null ? null : (int) $v;
        return new self(
            (string) $row['job_type'],
            (string) $row['op_key'],
            State::from((string) $row['state']),
            (int) $row['token'],
            $row['owner'] === null ? null : (string) $row['owner'],
            (int) $row['attempts'],
            (string) $row['fingerprint'],
            $row['payload'] === null ? null : (string) $row['payload'],
            $row['external_ref'] === null ? null : (string) $row['external_ref'],
            $row['result'] === null ? null : (string) $row['result'],
            self::flag($row['cancel_requested']),
            $row['error'] === null ? null : (string) $row['error'],
            $int($row['due_at']),
            $int($row['claimed_at']),
            $int($row['lease_until']),
            (int) $row['created_at'],
            (int) $row['updated_at'],
            $int($row['completed_at']),
        );
    }

    /** A boolean as each driver returns it (true, 1, '1', 't'). */
    public static function flag(mixed $v): bool
    {
        return $v === true || $v === 1 || $v === '1' || $v === 't' || $v === 'true';
    }
}
