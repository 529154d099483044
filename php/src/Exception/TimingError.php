<?php

declare(strict_types=1);

namespace Onceonly\Exception;

/** A timing rule of docs/DESIGN.md section 4 is broken: the worker must not start. */
class TimingError extends OnceonlyException
{
}
