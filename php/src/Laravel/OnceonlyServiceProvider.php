<?php

declare(strict_types=1);

namespace Onceonly\Laravel;

use Illuminate\Console\Events\CommandStarting;
use Illuminate\Support\Facades\Event;
use Illuminate\Support\ServiceProvider;

/**
 * Registers the records (Records), the artisan commands and the timing
 * check at worker start. config/onceonly.php (all optional):
 *
 * ```php
 * return [
 *     'connection' => null,                    // the database connection of the records (default: the default one)
 *     'jobs' => [App\Jobs\SendOutbox::class],  // checked when queue:work starts
 * ];
 * ```
 */
final class OnceonlyServiceProvider extends ServiceProvider
{
    public function register(): void
    {
        $this->app->singleton(Records::class);
    }

    public function boot(): void
    {
        if (!$this->app->runningInConsole()) {
            return;
        }
        $this->loadMigrationsFrom(__DIR__ . '/migrations');
        $this->commands([Console\MigrateCommand::class, Console\HeldCommand::class, Console\StuckCommand::class]);
        Event::listen(CommandStarting::class, function (CommandStarting $e): void {
            if ($e->command !== 'queue:work' && $e->command !== 'queue:listen') {
                return;
            }
            $timeout = (int) ($e->input->getParameterOption('--timeout', Specs::WORKER_TIMEOUT) ?: Specs::WORKER_TIMEOUT);
            $this->app['config']->set('onceonly.worker_timeout', $timeout);
            $connection = self::connectionArgument($e->command) ?? (string) $this->app['config']->get('queue.default');
            $this->app->make(WorkerCheck::class)->check($connection, $timeout, (array) $this->app['config']->get('onceonly.jobs', []));
        });
    }

    /** queue:work's connection argument, as given on the command line. */
    private static function connectionArgument(string $command): ?string
    {
        $argv = $_SERVER['argv'] ?? [];
        $at = array_search($command, $argv, true);
        if ($at === false) {
            return null;
        }
        foreach (array_slice($argv, $at + 1) as $token) {
            if ($token !== '' && $token[0] !== '-') {
                return $token;
            }
        }
        return null;
    }
}
