<?php

declare(strict_types=1);

namespace Onceonly\Exception;

/** Base of every onceonly exception. */
class OnceonlyException extends \RuntimeException
{
}
