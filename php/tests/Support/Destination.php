<?php

declare(strict_types=1);

namespace Onceonly\Tests\Support;

use Onceonly\EffectCtx;
use Onceonly\Exception\NotSent;
use Onceonly\Exception\OutcomeUnknown;
use Onceonly\Sent;

/**
 * A destination in memory: items it holds, every send it received, and a
 * script of what the next sends answer ('ok', 'not_sent', 'unknown' (sent,
 * answer lost), 'unknown_unsent', 'fail').
 */
final class Destination
{
    /** @var array<string, string> id => idempotency key */
    public array $items = [];
    public int $sends = 0;
    /** @var list<string> */
    public array $script = [];
    /** @var list<string> */
    public array $withdrawn = [];
    /** @var (callable(EffectCtx): void)|null called while "sending", after the item exists */
    public $during = null;

    public function __construct(public readonly bool $dedups = true)
    {
    }

    public function send(EffectCtx $ctx): Sent
    {
        $this->sends++;
        $next = array_shift($this->script) ?? 'ok';
        if ($next === 'not_sent') {
            throw new NotSent('connection refused');
        }
        if ($next === 'unknown_unsent') {
            throw new OutcomeUnknown('timed out before an answer');
        }
        if ($next === 'fail') {
            throw new \Onceonly\Exception\PermanentFailure('422 refused');
        }
        $id = $this->dedups ? array_search($ctx->idempotencyKey, $this->items, true) : false;
        if ($id === false) {
            $id = 'item-' . (count($this->items) + count($this->withdrawn) + 1);
            $this->items[$id] = $ctx->idempotencyKey;
        }
        if ($this->during !== null) {
            ($this->during)($ctx);
        }
        if ($next === 'unknown') {
            throw new OutcomeUnknown('connection reset after the request was written');
        }
        return new Sent($id, ['id' => $id]);
    }

    public function lookup(EffectCtx $ctx): ?Sent
    {
        $id = array_search($ctx->idempotencyKey, $this->items, true);
        return $id === false ? null : new Sent($id, ['id' => $id]);
    }

    public function withdraw(string $id): bool
    {
        unset($this->items[$id]);
        $this->withdrawn[] = $id;
        return true;
    }
}
