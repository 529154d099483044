<?php

namespace App\Jobs;

use App\Gateway;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Support\Facades\DB;
use Onceonly\EffectCtx;
use Onceonly\Laravel\Guarded;
use Onceonly\Laravel\GuardMiddleware;
use Onceonly\Sent;

/**
 * The seed's SendOutbox (claim-before-send.txt), guarded: one change to the
 * job (Guarded, onceonly(), operationKey(), the middleware) and none of its
 * hand-written claim, fenced write-back, Cache::lock or guarded failed().
 *
 * The claim is onceonly's record (onceonly_ops), taken before handle() runs
 * and written back under its fencing token after; a second delivery of the
 * same outbox id (a redelivery after retry_after, a double dispatch) gets
 * the first one's result without sending. The gateway cannot be asked what
 * it received and does not dedup (opaque): a send nobody can confirm (the
 * worker killed after sending, before recording) is held for a person
 * (`onceonly held`, `php artisan onceonly:held`), never sent twice.
 */
class SendOutbox implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, Guarded;

    public $tries = 3;
    public $backoff = 30;

    public function __construct(public int $id)
    {
    }

    public static function onceonly(): array
    {
        return [
            'job' => 'send_outbox',
            'effect' => 'opaque',
            'on_stale' => 'hold',
            // Longer than queue:work --timeout (600 s): the worker kills a job at
            // its timeout, so a live claim is never taken over.
            'lease' => (int) (getenv('OUTBOX_LEASE') ?: 900),
        ];
    }

    public function operationKey(): string
    {
        return "outbox-{$this->id}";
    }

    public function middleware(): array
    {
        return [new GuardMiddleware()];
    }

    public function handle(Gateway $gateway): Sent
    {
        $row = DB::table('outbox')->find($this->id);
        $res = $gateway->send($row->target, $row->body, $this->idempotencyKey());
        // For the application's own screens; onceonly's record decides.
        DB::table('outbox')->where('id', $this->id)->update(['status' => 'sent', 'external_id' => $res['id']]);
        return new Sent($res['id'], $res);
    }

    /** A cancel that came while sending: the item is deleted at the gateway, and the record says so. */
    public function withdraw(string $externalId, EffectCtx $ctx): bool
    {
        return app(Gateway::class)->delete($externalId);
    }

    /**
     * Laravel calls this when it gives the job up (tries exhausted, a kill at
     * the timeout). It never writes over a success: only a row still queued
     * or sending is marked failed, and onceonly's record is not touched.
     */
    public function failed(\Throwable $e): void
    {
        DB::table('outbox')->where('id', $this->id)->whereIn('status', ['queued', 'sending'])
            ->update(['status' => 'failed', 'error' => class_basename($e)]);
    }
}
