<?php

declare(strict_types=1);

namespace Onceonly\Exception;

/** Input that can never be valid; nothing was written. */
class InvalidInput extends OnceonlyException
{
}
