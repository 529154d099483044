<?php

declare(strict_types=1);

namespace Onceonly\Exception;

/** Any other database error (the driver's exception is the previous one). */
class DatabaseError extends OnceonlyException
{
}
