<?php

declare(strict_types=1);

namespace Onceonly\Exception;

/** It may have happened (a timeout, a reset): treated like a crash after the effect. */
class OutcomeUnknown extends EffectSignal
{
}
