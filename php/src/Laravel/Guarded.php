<?php

declare(strict_types=1);

namespace Onceonly\Laravel;

use Onceonly\EffectCtx;

/**
 * For a queued job guarded by onceonly: `use Guarded;` and return
 * `[new GuardMiddleware()]` from `middleware()` (or list it there next to
 * yours). The job says what it is in `onceonly()` and which operation it
 * performs in `operationKey()`; `handle()` then runs at most as often as
 * its effect kind and policy allow, and gets the idempotency key to hand
 * the destination from `$this->idempotencyKey()`.
 *
 * ```php
 * class SendOutbox implements ShouldQueue
 * {
 *     use Dispatchable, InteractsWithQueue, Queueable, Guarded;
 *
 *     public $timeout = 600;
 *
 *     public function __construct(public int $id) {}
 *
 *     public static function onceonly(): array
 *     {
 *         return ['job' => 'send_outbox', 'effect' => 'opaque', 'on_stale' => 'hold', 'lease' => 900];
 *     }
 *
 *     public function operationKey(): string { return "outbox-{$this->id}"; }
 *
 *     public function middleware(): array { return [new GuardMiddleware()]; }
 *
 *     public function handle(Gateway $gateway): Sent
 *     {
 *         $res = $gateway->send($this->id, idempotencyKey: $this->idempotencyKey());
 *         return new Sent($res['id'], $res);
 *     }
 * }
 * ```
 *
 * `onceonly()` keys: `job` (the job type), `effect` (keyed, lookup, opaque,
 * local), `on_stale` (opaque: hold, at_least_once, at_most_once), `lease`
 * (seconds, longer than the job's timeout), `max_retries` (tries under one
 * claim), `lock` (the lifetime in seconds of a Cache::lock the job holds,
 * checked against its timeout), `connection` (the database connection of
 * the records and of a local effect's transaction).
 */
trait Guarded
{
    /** The claim this run acts under (set by GuardMiddleware; not serialized). */
    protected ?EffectCtx $onceonlyCtx = null;

    /** The operation this job performs: stable across deliveries (an order id), not a message id. */
    abstract public function operationKey(): string;

    /** @return array<string, mixed> */
    abstract public static function onceonly(): array;

    /** The job's input, fingerprinted: a delivery of the same key with another payload is refused. */
    public function operationPayload(): mixed
    {
        return Payloads::constructorArguments($this);
    }

    /** @internal GuardMiddleware hands the claim in before handle() runs. */
    public function useOnceonlyClaim(?EffectCtx $ctx): void
    {
        $this->onceonlyCtx = $ctx;
    }

    /** The key to hand the destination (the same on every delivery and retry): JOB_TYPE:OP_KEY. */
    public function idempotencyKey(): string
    {
        if ($this->onceonlyCtx === null) {
            throw new \LogicException(static::class . '::idempotencyKey() is known only inside handle(), under GuardMiddleware');
        }
        return $this->onceonlyCtx->idempotencyKey;
    }

    /** The claim's context (token, attempt, time left), inside handle(). */
    public function onceonlyClaim(): ?EffectCtx
    {
        return $this->onceonlyCtx;
    }
}
