<?php

declare(strict_types=1);

namespace Onceonly;

/** One event of an operation's audit trail. */
final class AuditEvent
{
    public function __construct(
        public readonly int $id,
        public readonly int $at,
        public readonly string $event,
        public readonly string $actor,
        public readonly int $token,
        public readonly ?string $fromState,
        public readonly ?string $toState,
        public readonly ?string $detail,
        public readonly ?int $attempt,
        public readonly ?int $retryAfterMs,
    ) {
    }

    /** @param array<string, mixed> $row */
    public static function fromRow(array $row): self
    {
        return new self(
            (int) $row['id'],
            (int) $row['at'],
            (string) $row['event'],
            (string) $row['actor'],
            (int) $row['token'],
            $row['from_state'] === null ? null : (string) $row['from_state'],
            $row['to_state'] === null ? null : (string) $row['to_state'],
            $row['detail'] === null ? null : (string) $row['detail'],
            $row['attempt'] === null ? null : (int) $row['attempt'],
            $row['retry_after_ms'] === null ? null : (int) $row['retry_after_ms'],
        );
    }
}
