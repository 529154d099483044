<?php

declare(strict_types=1);

namespace Onceonly\Exception;

/** A fault injected at a named point (tests, replay): the worker stopped there. */
class InjectedCrash extends OnceonlyException
{
    public function __construct(public readonly string $point)
    {
        parent::__construct("injected crash at $point");
    }
}
