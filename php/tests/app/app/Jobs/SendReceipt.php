<?php

namespace App\Jobs;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Onceonly\Laravel\Guarded;
use Onceonly\Laravel\GuardMiddleware;
use Onceonly\Sent;

/**
 * The tests' outward job: "sends" a receipt by appending a line to the file
 * named by env TEST_EFFECTS (one line per effect: key, idempotency key,
 * pid). TEST_SLOW_MS makes it slow after writing (a worker can be killed
 * mid-job), TEST_HANG_FILE (while it exists) makes it wait there.
 */
class SendReceipt implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, Guarded;

    // Short, so a killed worker's job comes back within seconds in the tests:
    // queue:work's start check holds retry_after > 4 s and the lease (6 s) > 4 s.
    public $timeout = 4;
    public $tries = 10;

    public function __construct(public string $order, public string $to = 'a@example.com')
    {
    }

    public static function onceonly(): array
    {
        return ['job' => 'send_receipt', 'effect' => (string) (getenv('TEST_EFFECT') ?: 'opaque'), 'on_stale' => getenv('TEST_EFFECT') === 'keyed' ? null : 'hold', 'lease' => 6];
    }

    public function operationKey(): string
    {
        return "order-{$this->order}";
    }

    public function middleware(): array
    {
        return [new GuardMiddleware()];
    }

    public function handle(): Sent
    {
        $line = sprintf("%s %s %d\n", $this->operationKey(), $this->idempotencyKey(), getmypid());
        file_put_contents((string) getenv('TEST_EFFECTS'), $line, FILE_APPEND | LOCK_EX);
        $hang = getenv('TEST_HANG_FILE');
        while ($hang && file_exists($hang)) {
            usleep(20_000);
        }
        if ($ms = (int) getenv('TEST_SLOW_MS')) {
            usleep($ms * 1000);
        }
        return new Sent('receipt-' . $this->order, ['order' => $this->order]);
    }
}
