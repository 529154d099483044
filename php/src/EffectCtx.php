<?php

declare(strict_types=1);

namespace Onceonly;

/**
 * What an effect is given: the operation's identity, the idempotency key to
 * hand the destination (the same on every attempt), the claim's token and
 * attempt, the try under this claim, the payload, and the time left.
 */
final class EffectCtx
{
    public function __construct(
        public readonly string $jobType,
        public readonly string $opKey,
        public readonly string $idempotencyKey,
        public readonly int $token,
        public readonly int $attempt,
        public readonly int $try,
        public readonly mixed $payload,
        private readonly float $deadline,
        /** A local effect's connection, in the transaction the claim and completion commit in. */
        public readonly ?\PDO $conn = null,
    ) {
    }

    /** Seconds left before the job timeout (give it to your HTTP client). */
    public function remaining(): float
    {
        return max(0.0, $this->deadline - microtime(true));
    }
}
