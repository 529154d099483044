<?php

declare(strict_types=1);

namespace Onceonly;

/** A claim this worker holds: its fencing token, the claim count, and the lease (ms, database clock). */
final class Claim
{
    public function __construct(
        public readonly int $token,
        public readonly int $attempts,
        public readonly int $claimedAt,
        public readonly int $leaseUntil,
    ) {
    }

    /** @param array<string, mixed> $row */
    public static function fromRow(array $row): self
    {
        return new self((int) $row['token'], (int) $row['attempts'], (int) $row['claimed_at'], (int) $row['lease_until']);
    }
}
