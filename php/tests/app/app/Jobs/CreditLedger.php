<?php

namespace App\Jobs;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Support\Facades\DB;
use Onceonly\Laravel\Guarded;
use Onceonly\Laravel\GuardMiddleware;

/** A local effect: a row in the application's own database, in the claim's transaction. */
class CreditLedger implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, Guarded;

    public $timeout = 4;

    public function __construct(public string $entry, public int $amount)
    {
    }

    public static function onceonly(): array
    {
        return ['job' => 'credit_ledger', 'effect' => 'local', 'lease' => 6];
    }

    public function operationKey(): string
    {
        return $this->entry;
    }

    public function middleware(): array
    {
        return [new GuardMiddleware()];
    }

    public function handle(): array
    {
        DB::table('ledger')->insert(['entry' => $this->entry, 'amount' => $this->amount]);
        if ($this->amount < 0) {
            throw new \RuntimeException('a negative credit');
        }
        return ['credited' => $this->amount];
    }
}
