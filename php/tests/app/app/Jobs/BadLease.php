<?php

namespace App\Jobs;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Onceonly\Laravel\Guarded;
use Onceonly\Laravel\GuardMiddleware;

/** A job whose lease ends before its timeout: the worker's start check refuses it. */
class BadLease implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, Guarded;

    public $timeout = 10;

    public static function onceonly(): array
    {
        return ['job' => 'bad_lease', 'effect' => 'keyed', 'lease' => 5, 'lock' => 10];
    }

    public function operationKey(): string
    {
        return 'x';
    }

    public function middleware(): array
    {
        return [new GuardMiddleware()];
    }

    public function handle(): void
    {
    }
}
