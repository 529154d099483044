<?php

declare(strict_types=1);

namespace Onceonly\Exception;

/** An operation key or job type breaks the rules of protocol/corpus/keys.json. */
class InvalidKey extends InvalidInput
{
}
