<?php

declare(strict_types=1);

namespace Onceonly\Tests\Stores;

final class SqliteGuardTest extends GuardContract
{
    protected function kind(): string
    {
        return 'sqlite';
    }
}
