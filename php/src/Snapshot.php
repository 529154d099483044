<?php

declare(strict_types=1);

namespace Onceonly;

/** A record with the database's clock when it was read (ms). */
final class Snapshot
{
    public function __construct(public readonly Record $record, public readonly int $now)
    {
    }

    /** Whether the row is a claim past its lease at the time it was read. */
    public function stale(): bool
    {
        return $this->record->state === State::Claimed
            && $this->record->leaseUntil !== null
            && $this->record->leaseUntil <= $this->now;
    }
}
