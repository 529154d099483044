<?php

declare(strict_types=1);

namespace Onceonly\Laravel\Console;

use Illuminate\Console\Command;
use Onceonly\DbUrl;
use Onceonly\Laravel\Records;

/** Creates or upgrades onceonly's tables on the records' connection (the same migrations as every client; idempotent). */
final class MigrateCommand extends Command
{
    protected $signature = 'onceonly:migrate {--database= : the database connection (default: onceonly.connection, else the default one)}';
    protected $description = "Create or upgrade onceonly's tables (idempotent)";

    public function handle(Records $records): int
    {
        $store = $records->store($this->option('database'));
        $store->migrate();
        $this->info('migrated ' . DbUrl::redact($store->url));
        return 0;
    }
}
