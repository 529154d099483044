<?php

namespace App\Jobs;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Support\Facades\DB;
use Onceonly\EffectCtx;
use Onceonly\Exception\InjectedCrash;
use Onceonly\Laravel\GuardMiddleware;
use Onceonly\Laravel\Guarded;
use Onceonly\Laravel\Records;
use Onceonly\Sent;

/**
 * One delivery of a replay operation (php/replay/replay.php), guarded or
 * naive (read the state, then act), for one effect kind against the
 * replay's destination (the table replay_items: keyed dedups on the
 * idempotency key, lookup can be searched by it, opaque neither; a local
 * effect is a row of replay_local in the claim's transaction).
 *
 * $fault: null, or [point, how] with point after_claim / after_effect and
 * how "fault" (an exception there) or "sigkill" (the worker kills itself
 * there), fired on the operation's first delivery only. $cancel: the
 * effect asks for the operation's cancel while it sends. $fail: the
 * effect fails for good (a failure reported after a success).
 */
class ReplayJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, Guarded;

    public $timeout = 2;
    public $tries = 20;

    public function __construct(
        public string $jobType,
        public string $kind,
        public string $key,
        public array $payload,
        public string $mode = 'guarded',
        public ?array $fault = null,
        public bool $cancel = false,
        public bool $fail = false,
    ) {
    }

    public static function onceonly(): array
    {
        return ['job' => 'replay', 'effect' => 'keyed'];
    }

    public function options(): array
    {
        [$effect, $policy] = array_pad(explode('/', $this->kind), 2, null);
        return ['job' => $this->jobType, 'effect' => $effect, 'on_stale' => $policy === null ? null : str_replace('-', '_', $policy), 'lease' => 3, 'max_retries' => 1];
    }

    public function operationKey(): string
    {
        return $this->key;
    }

    public function operationPayload(): mixed
    {
        return $this->payload;
    }

    public function middleware(): array
    {
        if ($this->mode !== 'guarded') {
            return [];
        }
        return [new GuardMiddleware($this->options(), fn (string $point) => $this->faultAt($point))];
    }

    public function handle(): mixed
    {
        if ($this->mode === 'naive') {
            return $this->naive();
        }
        return $this->effect($this->onceonlyClaim());
    }

    /** Read the state, then act: the code the seed warns about. */
    private function naive(): mixed
    {
        $done = DB::table('replay_naive')->where('job_type', $this->jobType)->where('op_key', $this->key)->value('status');
        if ($done === 'done') {
            return null;
        }
        $this->faultAt('after_claim');
        $out = $this->kind === 'local'
            ? DB::transaction(fn () => $this->effect(null))
            : $this->effect(null);
        $this->faultAt('after_effect');
        DB::table('replay_naive')->updateOrInsert(['job_type' => $this->jobType, 'op_key' => $this->key], ['status' => 'done']);
        return $out;
    }

    private function effect(?EffectCtx $ctx): mixed
    {
        $idem = "{$this->jobType}:{$this->key}";
        if ($this->fail) {
            throw new \Onceonly\Exception\PermanentFailure('the destination refused (a failure after a success)');
        }
        if ($this->kind === 'local') {
            DB::table('replay_local')->insert(['job_type' => $this->jobType, 'op_key' => $this->key]);
            return ['rows' => 1];
        }
        $id = $this->kind === 'keyed'
            ? DB::table('replay_items')->where('idem_key', $idem)->value('id')
            : null;
        if ($id === null) {
            $id = DB::table('replay_items')->insertGetId(['job_type' => $this->jobType, 'op_key' => $this->key, 'idem_key' => $idem, 'live' => 1]);
        }
        if ($this->cancel && $ctx !== null) {
            app(Records::class)->store()->requestCancel($this->jobType, $this->key, $ctx->token);
        }
        return new Sent("item-$id", ['id' => "item-$id"]);
    }

    public function lookup(EffectCtx $ctx): ?Sent
    {
        if ($this->kind !== 'lookup') {
            throw new \RuntimeException('this destination cannot be searched');
        }
        $id = DB::table('replay_items')->where('idem_key', "{$this->jobType}:{$this->key}")->value('id');
        return $id === null ? null : new Sent("item-$id", ['id' => "item-$id"]);
    }

    public function withdraw(string $ref, EffectCtx $ctx): bool
    {
        return DB::table('replay_items')->where('id', (int) substr($ref, 5))->update(['live' => 0]) >= 0;
    }

    /** Fires the scenario's fault at $point, on the operation's first delivery only. */
    private function faultAt(string $point): bool
    {
        if ($this->fault === null || $this->fault[0] !== $point) {
            return false;
        }
        // Outside any transaction (a local effect's would roll the mark back).
        $mark = getenv('REPLAY_FAULTS') . '/' . md5("{$this->mode}:{$this->jobType}:{$this->key}");
        $f = @fopen($mark, 'x');
        if ($f === false) {
            return false; // fired already
        }
        fclose($f);
        if ($this->fault[1] === 'sigkill') {
            posix_kill(getmypid(), SIGKILL);
        }
        if ($this->mode === 'naive') {
            throw new InjectedCrash($point);
        }
        return true;
    }
}
