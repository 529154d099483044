<?php

namespace App\Jobs;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Onceonly\Sent;

/** SendReceipt without onceonly: the benchmark's baseline (same handle(), same effect). */
class PlainReceipt implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable;

    // Short, so a killed worker's job comes back within seconds in the tests:
    // queue:work's start check holds retry_after > 4 s and the lease (6 s) > 4 s.
    public $timeout = 4;
    public $tries = 10;

    public function __construct(public string $order, public string $to = 'a@example.com')
    {
    }

    public function handle(): Sent
    {
        $key = "order-{$this->order}";
        $line = sprintf("%s %s %d\n", $key, "send_receipt:$key", getmypid());
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
