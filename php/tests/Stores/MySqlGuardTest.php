<?php

declare(strict_types=1);

namespace Onceonly\Tests\Stores;

final class MySqlGuardTest extends GuardContract
{
    protected function kind(): string
    {
        return 'mysql';
    }
}
