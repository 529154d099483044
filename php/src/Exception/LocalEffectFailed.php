<?php

declare(strict_types=1);

namespace Onceonly\Exception;

/** A local effect threw; its transaction rolls back, nothing was recorded. The effect's exception is the previous one. */
class LocalEffectFailed extends OnceonlyException
{
}
