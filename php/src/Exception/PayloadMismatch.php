<?php

declare(strict_types=1);

namespace Onceonly\Exception;

/** The key is stored with another payload: another operation reusing the key. */
class PayloadMismatch extends OnceonlyException
{
    public function __construct(public readonly string $jobType, public readonly string $opKey, public readonly string $stored, public readonly string $offered)
    {
        parent::__construct("operation $jobType:$opKey exists with another payload (stored fingerprint $stored, this one $offered)");
    }
}
