<?php

declare(strict_types=1);

namespace Onceonly\Exception;

use Onceonly\Record;

/** This worker no longer holds the claim; nothing was written over the row. $row is the row as it now stands (decisions' ROW form). */
class LostClaim extends OnceonlyException
{
    /** @param array<string, mixed> $row */
    public function __construct(public readonly string $jobType, public readonly string $opKey, public readonly int $token, public readonly array $row)
    {
        parent::__construct(sprintf(
            'lost the claim on %s:%s (held token %d); the row is now %s with token %d',
            $jobType, $opKey, $token, $row['state'], $row['token'],
        ));
    }
}
