<?php

declare(strict_types=1);

namespace Onceonly\Exception;

/** A local effect did not finish within the job timeout; its transaction rolls back. */
class EffectTimeout extends OnceonlyException
{
}
