<?php

declare(strict_types=1);

namespace Onceonly;

/**
 * Ends the machine from deep inside it with an `error` step.
 *
 * @internal
 */
final class Ended extends \Exception
{
    public function __construct(public readonly array $step)
    {
        parent::__construct('ended');
    }
}
