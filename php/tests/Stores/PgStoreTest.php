<?php

declare(strict_types=1);

namespace Onceonly\Tests\Stores;

final class PgStoreTest extends StoreContract
{
    protected function kind(): string
    {
        return 'postgres';
    }
}
