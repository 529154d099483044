<?php

namespace App\Console;

use Illuminate\Console\Command;

/** Dispatches a test job to the queue: `php artisan test:dispatch SendReceipt 42 --times=3`. */
class DispatchCommand extends Command
{
    protected $signature = 'test:dispatch {job} {args*} {--times=1} {--distinct : append -N to the first argument of the Nth job}';
    protected $description = 'Dispatch a test job (tests only)';

    public function handle(): int
    {
        $class = 'App\\Jobs\\' . $this->argument('job');
        $args = array_map(fn ($a) => is_numeric($a) && !str_contains($a, '.') && $this->argument('job') === 'CreditLedger' ? (int) $a : $a, $this->argument('args'));
        for ($i = 0; $i < (int) $this->option('times'); $i++) {
            $these = $args;
            if ($this->option('distinct')) {
                $these[0] .= "-$i";
            }
            $class::dispatch(...$these);
        }
        return 0;
    }
}
