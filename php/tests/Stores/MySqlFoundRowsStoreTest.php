<?php

declare(strict_types=1);

namespace Onceonly\Tests\Stores;

final class MySqlFoundRowsStoreTest extends StoreContract
{
    use MySqlOnly;

    protected function kind(): string
    {
        return 'mysql-found-rows';
    }
}
