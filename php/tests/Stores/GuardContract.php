<?php

declare(strict_types=1);

namespace Onceonly\Tests\Stores;

use Onceonly\EffectCtx;
use Onceonly\Exception\InjectedCrash;
use Onceonly\Exception\LocalEffectFailed;
use Onceonly\Exception\LostClaim;
use Onceonly\Exception\PayloadMismatch;
use Onceonly\Guard;
use Onceonly\JobSpec;
use Onceonly\State;
use Onceonly\Store\Store;
use Onceonly\Tests\Support\Corpus;
use Onceonly\Tests\Support\Databases;
use Onceonly\Tests\Support\Destination;
use PHPUnit\Framework\TestCase;

/** The guard (the decisions machine's interpreter) on each real database. */
abstract class GuardContract extends TestCase
{
    protected Store $store;

    abstract protected function kind(): string;

    protected function setUp(): void
    {
        $this->store = Databases::of($this, $this->kind());
    }

    private function guard(string $effect, ?string $onStale = null, int $maxRetries = 1, int $leaseMs = 30_000, string $owner = 'w1'): Guard
    {
        return new Guard($this->store, new JobSpec('mail', $effect, $onStale, $maxRetries, $leaseMs, min(10_000, $leaseMs - 1)), $owner);
    }

    private function runOn(Guard $g, Destination $d, string $key = 'order-1', mixed $payload = ['to' => 'a@example.com']): \Onceonly\Outcome
    {
        return $g->run($key, $payload, [$d, 'send'], [$d, 'lookup'], fn (string $id) => $d->withdraw($id));
    }

    public function testThreeDeliveriesOneEffect(): void
    {
        $d = new Destination(dedups: false);
        $g = $this->guard('opaque', 'hold');
        $first = $this->runOn($g, $d);
        $this->assertTrue($first->isDone());
        $this->assertFalse($first->repeat());
        foreach ([1, 2] as $_) {
            $again = $this->runOn($g, $d);
            $this->assertTrue($again->isDone());
            $this->assertTrue($again->repeat());
            $this->assertSame(['id' => 'item-1'], $again->result());
            $this->assertSame('item-1', $again->externalRef());
        }
        $this->assertSame(1, $d->sends);
        $r = $this->store->get('mail', 'order-1')->record;
        $this->assertSame([State::Completed, 'item-1', '{"id":"item-1"}'], [$r->state, $r->externalRef, $r->result]);
    }

    public function testTheIdempotencyKeyIsJobTypeAndKey(): void
    {
        $seen = null;
        $this->guard('keyed')->run('order-7', null, function (EffectCtx $ctx) use (&$seen) {
            $seen = [$ctx->idempotencyKey, $ctx->token, $ctx->attempt, $ctx->try];
            return ['ok' => true];
        });
        $this->assertSame(['mail:order-7', 1, 1, 1], $seen);
    }

    public function testNotSentIsTriedAgainUnderTheClaimThenReleased(): void
    {
        $d = new Destination();
        $d->script = ['not_sent', 'ok'];
        $this->assertTrue($this->runOn($this->guard('keyed', maxRetries: 1), $d)->isDone());
        $this->assertSame(2, $d->sends);
        $d2 = new Destination();
        $d2->script = ['not_sent', 'not_sent'];
        $out = $this->runOn($this->guard('keyed', maxRetries: 1), $d2, 'order-2');
        $this->assertSame('retry_later', $out->kind);
        $this->assertSame(500, $out->retryAfterMs());
        $this->assertSame('connection refused', $out->reason());
        $h = $this->store->history('mail', 'order-2');
        $this->assertSame([['retry', 1, 500]], array_map(fn ($e) => [$e->event, $e->attempt, $e->retryAfterMs], $h));
        $this->assertSame(State::Queued, $this->store->get('mail', 'order-2')->record->state);
    }

    public function testAnOpaqueUnknownOutcomeIsHeldAndStaysHeld(): void
    {
        $d = new Destination(dedups: false);
        $d->script = ['unknown'];
        $out = $this->runOn($this->guard('opaque', 'hold'), $d);
        $this->assertSame('held', $out->kind);
        $this->assertSame('held', $this->runOn($this->guard('opaque', 'hold', owner: 'w2'), $d)->kind);
        $this->assertSame(1, $d->sends);
        $this->assertSame(['hold'], array_map(fn ($e) => $e->event, $this->store->history('mail', 'order-1')));
        $this->assertCount(1, $this->store->held());
    }

    public function testACrashAfterTheEffectIsRedoneWithTheSameKeyAfterTheLease(): void
    {
        $d = new Destination(dedups: true);
        $g = $this->guard('keyed', leaseMs: 5_000)->withFaults(fn (string $point) => $point === 'after_effect');
        try {
            $this->runOn($g, $d);
            $this->fail('no crash');
        } catch (InjectedCrash $e) {
            $this->assertSame('after_effect', $e->point);
        }
        $this->assertSame('in_progress', $this->runOn($this->guard('keyed', leaseMs: 5_000, owner: 'w2'), $d)->kind, 'a live claim is not taken over');
        $this->store->clockOffsetMs = 6_000;
        $out = $this->runOn($this->guard('keyed', leaseMs: 5_000, owner: 'w2'), $d);
        $this->assertTrue($out->isDone());
        $this->assertSame(2, $d->sends);
        $this->assertCount(1, $d->items, 'the destination dedups the same key');
        $r = $this->store->get('mail', 'order-1')->record;
        $this->assertSame([2, 2, 'w2'], [$r->token, $r->attempts, $r->owner]);
        $this->assertSame(['take_over'], array_map(fn ($e) => $e->event, $this->store->history('mail', 'order-1')));
    }

    public function testAStaleOpaqueClaimUnderHoldIsHeldNotRedone(): void
    {
        $d = new Destination(dedups: false);
        $g = $this->guard('opaque', 'hold', leaseMs: 5_000)->withFaults(fn (string $point) => $point === 'after_effect');
        try {
            $this->runOn($g, $d);
        } catch (InjectedCrash) {
        }
        $this->store->clockOffsetMs = 6_000;
        $out = $this->runOn($this->guard('opaque', 'hold', leaseMs: 5_000, owner: 'w2'), $d);
        $this->assertSame('held', $out->kind);
        $this->assertStringContainsString('went past its lease', $out->reason());
        $this->assertSame(1, $d->sends);
    }

    public function testALookupEffectLooksBeforeRedoing(): void
    {
        $d = new Destination(dedups: false);
        $g = $this->guard('lookup', leaseMs: 5_000)->withFaults(fn (string $point) => $point === 'after_effect');
        try {
            $this->runOn($g, $d);
        } catch (InjectedCrash) {
        }
        $this->store->clockOffsetMs = 6_000;
        $out = $this->runOn($this->guard('lookup', leaseMs: 5_000, owner: 'w2'), $d);
        $this->assertTrue($out->isDone());
        $this->assertSame('item-1', $out->externalRef());
        $this->assertSame(1, $d->sends, 'found, not sent again');
    }

    public function testAnotherPayloadUnderTheKeyIsRefused(): void
    {
        $d = new Destination();
        $this->runOn($this->guard('keyed'), $d, 'k', ['n' => 1]);
        $this->expectException(PayloadMismatch::class);
        $this->runOn($this->guard('keyed'), $d, 'k', ['n' => 2]);
    }

    public function testACancelWhileSendingWithdrawsTheItem(): void
    {
        $d = new Destination(dedups: false);
        $d->during = function (EffectCtx $ctx): void {
            $this->assertTrue($this->store->requestCancel($ctx->jobType, $ctx->opKey, $ctx->token));
        };
        $out = $this->runOn($this->guard('opaque', 'hold'), $d);
        $this->assertSame('cancelled', $out->kind);
        $this->assertSame('item-1', $out->fields['withdrawn_ref']);
        $this->assertSame([], $d->items);
        $r = $this->store->get('mail', 'order-1')->record;
        $this->assertSame([State::Cancelled, 'item-1'], [$r->state, $r->externalRef]);
        $this->assertSame(['compensated'], array_map(fn ($e) => $e->event, $this->store->history('mail', 'order-1')));
    }

    public function testAZombieCompletionIsALostClaimAndWritesNothing(): void
    {
        $d = new Destination(dedups: false);
        $d->during = function (EffectCtx $ctx): void {
            // Meanwhile the lease ran out and another worker took the claim.
            $this->store->clockOffsetMs = 60_000;
            $this->assertNotNull($this->store->takeOver($ctx->jobType, $ctx->opKey, $ctx->token, State::Claimed, 'w2', 30_000, 'stale'));
            $this->store->clockOffsetMs = 0;
        };
        try {
            $this->runOn($this->guard('opaque', 'at_least_once'), $d);
            $this->fail('no lost claim');
        } catch (LostClaim $e) {
            $this->assertSame(1, $e->token);
            $this->assertSame(2, $e->row['token']);
        }
        $r = $this->store->get('mail', 'order-1')->record;
        $this->assertSame([State::Claimed, 'w2', null], [$r->state, $r->owner, $r->result]);
        $this->assertSame(['lost_claim'], array_map(fn ($e) => $e->event, $this->store->history('mail', 'order-1')));
    }

    public function testEveryAuditEventIsOneTheProtocolNames(): void
    {
        $names = array_column(Corpus::load('protocol/transitions.json')['audit_events'], 'name');
        $d = new Destination();
        $d->script = ['not_sent', 'not_sent', 'unknown'];
        $this->runOn($this->guard('keyed', maxRetries: 1), $d, 'a');
        $this->store->clockOffsetMs = 120_000;
        $this->runOn($this->guard('opaque', 'at_most_once', maxRetries: 0), $d, 'b');
        foreach (['a', 'b'] as $k) {
            foreach ($this->store->history('mail', $k) as $e) {
                $this->assertContains($e->event, $names);
            }
        }
    }

    public function testALocalEffectCommitsWithItsClaim(): void
    {
        $pdo = $this->store->pdo();
        $table = 'laravel_ledger_' . bin2hex(random_bytes(4));
        $pdo->exec("CREATE TABLE $table (op VARCHAR(64) NOT NULL, amount INT NOT NULL)");
        $g = new Guard($this->store, new JobSpec('ledger', 'local'), 'w1');
        $credit = function (string $key) use ($g, $pdo, $table) {
            $pdo->beginTransaction();
            try {
                $out = $g->runLocal($pdo, $key, ['amount' => 5], function (EffectCtx $ctx) use ($table) {
                    $ctx->conn->prepare("INSERT INTO $table (op, amount) VALUES (?, ?)")->execute([$ctx->opKey, 5]);
                    if ($ctx->opKey === 'boom') {
                        throw new \RuntimeException('disk full');
                    }
                    return ['credited' => 5];
                });
                $pdo->commit();
                return $out;
            } catch (\Throwable $e) {
                $pdo->rollBack();
                throw $e;
            }
        };
        $this->assertFalse($credit('c-1')->repeat());
        $this->assertTrue($credit('c-1')->repeat());
        try {
            $credit('boom');
            $this->fail('no failure');
        } catch (LocalEffectFailed $e) {
            $this->assertInstanceOf(\RuntimeException::class, $e->getPrevious());
        }
        $this->assertNull($this->store->get('ledger', 'boom'), 'the claim rolled back with the effect');
        $this->assertSame([['c-1', 5]], array_map(fn ($r) => [$r[0], (int) $r[1]], $pdo->query("SELECT op, amount FROM $table")->fetchAll(\PDO::FETCH_NUM)));
    }
}
