<?php

declare(strict_types=1);

namespace Onceonly\Exception;

/** It failed for good: not retried. */
class PermanentFailure extends EffectSignal
{
}
