<?php

declare(strict_types=1);

namespace Onceonly;

/** What an effect returns when it happened: its reference at the destination and what repeats get back. */
final class Sent
{
    public function __construct(public readonly ?string $externalRef = null, public readonly mixed $result = null)
    {
    }
}
