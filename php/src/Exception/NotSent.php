<?php

declare(strict_types=1);

namespace Onceonly\Exception;

/** Surely not done (nothing reached the destination): safe to retry. */
class NotSent extends EffectSignal
{
}
