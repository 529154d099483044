<?php

declare(strict_types=1);

namespace Onceonly\Laravel;

use Onceonly\Exception\OnceonlyException;

/** The guarded operation failed for good (the record says why); the queued job is failed with this. */
final class OperationFailed extends OnceonlyException
{
}
