<?php

declare(strict_types=1);

namespace Onceonly\Store;

use Onceonly\State;

/** One fenced transition: only from $from with $token; null fields keep their value. Build it with Protocol::move(). */
final class OpMove
{
    public function __construct(
        public readonly string $jobType,
        public readonly string $opKey,
        public readonly int $token,
        public readonly State $from,
        public readonly State $to,
        public readonly bool $unlessCancelRequested = false,
        public readonly ?string $externalRef = null,
        public readonly ?string $result = null,
        public readonly ?string $error = null,
        public readonly ?int $retryAfterMs = null,
    ) {
    }
}
