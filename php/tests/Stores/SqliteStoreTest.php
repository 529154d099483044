<?php

declare(strict_types=1);

namespace Onceonly\Tests\Stores;

final class SqliteStoreTest extends StoreContract
{
    protected function kind(): string
    {
        return 'sqlite';
    }
}
