<?php

declare(strict_types=1);

namespace Onceonly\Tests\Stores;

use Onceonly\Claim;
use Onceonly\Exception\DatabaseError;
use Onceonly\Payload;
use Onceonly\Protocol;
use Onceonly\Snapshot;
use Onceonly\State;
use Onceonly\Store\Store;
use Onceonly\Tests\Support\Databases;
use PHPUnit\Framework\TestCase;

/**
 * What every store must do, run against each real database: each claim,
 * take-over and move decides by its count, and the count is right.
 */
abstract class StoreContract extends TestCase
{
    protected Store $store;

    abstract protected function kind(): string;

    protected function setUp(): void
    {
        $this->store = Databases::of($this, $this->kind());
    }

    private function claimed(Claim|Snapshot $c): Claim
    {
        $this->assertInstanceOf(Claim::class, $c);
        return $c;
    }

    private function snap(Claim|Snapshot $c): Snapshot
    {
        $this->assertInstanceOf(Snapshot::class, $c);
        return $c;
    }

    public function testMigrateTwiceChangesNothing(): void
    {
        $this->store->migrate();
        $this->store->migrate();
        $this->assertNull($this->store->get('job', 'k'));
    }

    public function testOneClaimWinsAndTheRepeatSeesIt(): void
    {
        $p = Payload::of(['n' => 1]);
        $c = $this->claimed($this->store->claim('job', 'k', 'w1', $p, 30_000));
        $this->assertSame([1, 1], [$c->token, $c->attempts]);
        $this->assertSame(30_000, $c->leaseUntil - $c->claimedAt);
        $s = $this->snap($this->store->claim('job', 'k', 'w2', $p, 30_000));
        $this->assertSame(State::Claimed, $s->record->state);
        $this->assertSame('w1', $s->record->owner);
        $this->assertSame('{"n":1}', $s->record->payload);
        $this->assertSame($p->fingerprint, $s->record->fingerprint);
        $this->assertFalse($s->stale());
    }

    public function testACompletionIsFencedByItsToken(): void
    {
        $p = Payload::none();
        $c = $this->claimed($this->store->claim('job', 'k', 'w1', $p, 30_000));
        $this->assertFalse($this->store->move(Protocol::move('complete', 'job', 'k', $c->token + 1, result: '{}')));
        $this->assertTrue($this->store->move(Protocol::move('complete', 'job', 'k', $c->token, externalRef: 'ref-1', result: '{"ok":true}')));
        $this->assertFalse($this->store->move(Protocol::move('complete', 'job', 'k', $c->token, result: '{}')), 'a second completion');
        $r = $this->store->get('job', 'k')->record;
        $this->assertSame(State::Completed, $r->state);
        $this->assertSame('ref-1', $r->externalRef);
        $this->assertSame('{"ok":true}', $r->result);
        $this->assertNull($r->leaseUntil);
        $this->assertNotNull($r->completedAt);
        $this->assertSame(State::Completed, $this->snap($this->store->claim('job', 'k', 'w2', $p, 30_000))->record->state);
    }

    public function testAReleasedClaimIsClaimedAgainWhenDue(): void
    {
        $p = Payload::of('x');
        $c = $this->claimed($this->store->claim('job', 'k', 'w1', $p, 30_000));
        $this->assertTrue($this->store->move(Protocol::move('release', 'job', 'k', $c->token, error: 'not sent', retryAfterMs: 60_000)));
        $s = $this->snap($this->store->claim('job', 'k', 'w2', $p, 30_000));
        $this->assertSame(State::Queued, $s->record->state, 'not due for a minute');
        $this->assertSame('not sent', $s->record->error);
        $this->store->clockOffsetMs = 61_000;
        $c2 = $this->claimed($this->store->claim('job', 'k', 'w2', $p, 30_000));
        $this->assertSame([2, 2], [$c2->token, $c2->attempts]);
        $this->assertSame('w2', $this->store->get('job', 'k')->record->owner);
    }

    public function testAnotherPayloadUnderTheKeyIsNotClaimed(): void
    {
        $c = $this->claimed($this->store->claim('job', 'k', 'w1', Payload::of(1), 30_000));
        $this->store->move(Protocol::move('release', 'job', 'k', $c->token));
        $s = $this->snap($this->store->claim('job', 'k', 'w2', Payload::of(2), 30_000));
        $this->assertSame(State::Queued, $s->record->state);
        $this->assertSame(Payload::of(1)->fingerprint, $s->record->fingerprint);
    }

    public function testAStaleClaimIsTakenOverOnce(): void
    {
        $p = Payload::none();
        $c = $this->claimed($this->store->claim('job', 'k', 'w1', $p, 1_000));
        $this->assertNull($this->store->takeOver('job', 'k', $c->token, State::Claimed, 'w2', 1_000, 'stale'), 'a live claim');
        $this->store->clockOffsetMs = 2_000;
        $this->assertTrue($this->store->get('job', 'k')->stale());
        $t = $this->store->takeOver('job', 'k', $c->token, State::Claimed, 'w2', 5_000, 'stale');
        $this->assertNotNull($t);
        $this->assertSame([2, 2], [$t->token, $t->attempts]);
        $this->assertNull($this->store->takeOver('job', 'k', $c->token, State::Claimed, 'w3', 5_000, 'stale'), 'the same stale token again');
        $this->assertFalse($this->store->move(Protocol::move('complete', 'job', 'k', $c->token, result: '{}')), "the zombie's completion");
        $held = $this->store->takeOver('job', 'k', 2, State::Held, 'w3', 5_000, 'x');
        $this->assertNull($held, 'the new claim is live');
        $r = $this->store->get('job', 'k')->record;
        $this->assertSame(['w2', 'stale', 2], [$r->owner, $r->error, $r->token]);
    }

    public function testATakeOverToHeldClearsTheLease(): void
    {
        $c = $this->claimed($this->store->claim('job', 'k', 'w1', Payload::none(), 1_000));
        $this->store->clockOffsetMs = 2_000;
        $t = $this->store->takeOver('job', 'k', $c->token, State::Held, 'w2', 5_000, 'may have been sent');
        $this->assertSame([2, 1], [$t->token, $t->attempts]);
        $r = $this->store->get('job', 'k')->record;
        $this->assertSame(State::Held, $r->state);
        $this->assertNull($r->leaseUntil);
        $this->assertCount(1, $this->store->held('job'));
        $this->assertCount(0, $this->store->held('other'));
    }

    public function testACancelRequestRefusesTheCompletionNotTheCancel(): void
    {
        $c = $this->claimed($this->store->claim('job', 'k', 'w1', Payload::none(), 30_000));
        $this->assertTrue($this->store->requestCancel('job', 'k', $c->token));
        // The second request changes nothing but the version: a store that
        // counted changed rows without the version bump would say 0 here.
        $this->assertTrue($this->store->requestCancel('job', 'k', $c->token), 'a repeated cancel request counts 1');
        $this->assertFalse($this->store->requestCancel('job', 'k', $c->token + 1));
        [$lease, $cancel] = $this->store->heartbeat('job', 'k', $c->token, 30_000);
        $this->assertTrue($cancel);
        $this->assertGreaterThan($c->claimedAt, $lease);
        $this->assertFalse($this->store->move(Protocol::move('complete', 'job', 'k', $c->token, result: '{}')));
        $this->assertFalse($this->store->move(Protocol::move('release', 'job', 'k', $c->token)));
        $this->assertTrue($this->store->move(Protocol::move('cancel_claimed', 'job', 'k', $c->token, error: 'cancelled before the effect')));
        $this->assertSame(State::Cancelled, $this->store->get('job', 'k')->record->state);
        $this->assertNull($this->store->heartbeat('job', 'k', $c->token, 30_000), 'no claim to renew');
    }

    public function testTwoHeartbeatsInOneMillisecondBothCount(): void
    {
        $c = $this->claimed($this->store->claim('job', 'k', 'w1', Payload::none(), 30_000));
        for ($i = 0; $i < 5; $i++) {
            $this->assertNotNull($this->store->heartbeat('job', 'k', $c->token, 30_000));
        }
    }

    public function testEnqueueOnceAndClaimTheQueuedRow(): void
    {
        $p = Payload::of(['to' => 'a@example.com']);
        $this->assertTrue($this->store->enqueue('job', 'k', $p));
        $this->assertFalse($this->store->enqueue('job', 'k', $p));
        $c = $this->claimed($this->store->claim('job', 'k', 'w1', $p, 30_000));
        $this->assertSame([1, 1], [$c->token, $c->attempts]);
    }

    public function testTheAuditTrailKeepsWhatWasAppended(): void
    {
        $this->store->audit('job', 'k', 'retry', 'w1', 1, 'claimed', 'queued', 'not sent', 1, 500);
        $this->store->audit('job', 'k', 'hold', 'w1', 2, 'claimed', 'held', "line\nbreak");
        $h = $this->store->history('job', 'k');
        $this->assertCount(2, $h);
        $this->assertSame(['retry', 1, 500], [$h[0]->event, $h[0]->attempt, $h[0]->retryAfterMs]);
        $this->assertSame(['hold', null, "line\nbreak"], [$h[1]->event, $h[1]->attempt, $h[1]->detail]);
        $this->assertLessThanOrEqual(1, abs($h[0]->at - $this->store->now()) / 60_000);
    }

    public function testStuckListsClaimsPastTheirLease(): void
    {
        $this->claimed($this->store->claim('job', 'a', 'w1', Payload::none(), 1_000));
        $this->claimed($this->store->claim('job', 'b', 'w1', Payload::none(), 60_000));
        $this->assertCount(0, $this->store->stuck());
        $this->store->clockOffsetMs = 2_000;
        $stuck = $this->store->stuck('job');
        $this->assertSame(['a'], array_map(fn ($r) => $r->opKey, $stuck));
    }

    public function testKeysCompareBytewise(): void
    {
        $this->claimed($this->store->claim('job', 'k', 'w1', Payload::none(), 30_000));
        $this->claimed($this->store->claim('job', 'K', 'w1', Payload::none(), 30_000));
        $this->claimed($this->store->claim('job', 'k ', 'w1', Payload::none(), 30_000));
        $this->claimed($this->store->claim('job', "\u{e9}", 'w1', Payload::none(), 30_000));
        $this->claimed($this->store->claim('job', "e\u{301}", 'w1', Payload::none(), 30_000));
        $this->assertSame("e\u{301}", $this->store->get('job', "e\u{301}")->record->opKey);
    }
}
