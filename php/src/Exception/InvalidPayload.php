<?php

declare(strict_types=1);

namespace Onceonly\Exception;

/** A payload that is not JSON (or holds a value JSON cannot carry). */
class InvalidPayload extends InvalidInput
{
}
