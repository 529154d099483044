<?php

declare(strict_types=1);

namespace Onceonly\Exception;

/** Thrown by an effect to report an outcome other than done; the message is the reason. */
class EffectSignal extends OnceonlyException
{
}
