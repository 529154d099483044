<?php

declare(strict_types=1);

namespace Onceonly\Tests\Stores;

final class MySqlStoreTest extends StoreContract
{
    use MySqlOnly;

    protected function kind(): string
    {
        return 'mysql';
    }
}
