<?php

declare(strict_types=1);

namespace Onceonly\Exception;

/** No record for this job type and key. */
class NotFound extends OnceonlyException
{
    public function __construct(public readonly string $jobType, public readonly string $opKey)
    {
        parent::__construct("no operation $jobType:$opKey");
    }
}
