<?php

declare(strict_types=1);

namespace Onceonly\Tests\Stores;

final class PgGuardTest extends GuardContract
{
    protected function kind(): string
    {
        return 'postgres';
    }
}
