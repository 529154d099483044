<?php

declare(strict_types=1);

namespace Onceonly\Tests\Stores;

use Onceonly\Claim;
use Onceonly\Exception\DatabaseError;
use Onceonly\Payload;

/** What only the MySQL store has to get right: the counting modes, strict mode. */
trait MySqlOnly
{
    public function testTheMySqlSuitesRunBothCountingModes(): void
    {
        // The trap itself: an UPDATE that matches a row and changes nothing
        // counts 1 with MYSQL_ATTR_FOUND_ROWS and 0 without. The deciding
        // statements never do that (version + 1), so both suites pass alike.
        $c = $this->claimedHere($this->store->claim('job', 'k', 'w1', Payload::none(), 30_000));
        $n = $this->store->pdo()->exec("UPDATE onceonly_ops SET owner = owner WHERE op_key = 'k'");
        $this->assertSame($this->kind() === 'mysql-found-rows' ? 1 : 0, $n);
        $this->assertSame(1, $c->token);
    }

    public function testRepeatedWritesInOneMillisecondEachCountOne(): void
    {
        // The clock stopped (SET timestamp): a repeated cancel request or
        // heartbeat writes the same values again, and only `version + 1`
        // makes the row change, so that a driver counting changed rows
        // (PDO without MYSQL_ATTR_FOUND_ROWS) still says 1.
        $c = $this->claimedHere($this->store->claim('job', 'k', 'w1', Payload::none(), 30_000));
        $this->store->pdo()->exec('SET timestamp = ' . sprintf('%.6F', microtime(true)));
        try {
            $this->assertTrue($this->store->requestCancel('job', 'k', $c->token));
            $this->assertTrue($this->store->requestCancel('job', 'k', $c->token), 'a repeated cancel request');
            $this->assertNotNull($this->store->heartbeat('job', 'k', $c->token, 30_000));
            $this->assertNotNull($this->store->heartbeat('job', 'k', $c->token, 30_000), 'a repeated heartbeat');
        } finally {
            $this->store->pdo()->exec('SET timestamp = DEFAULT');
        }
    }

    public function testMigrateRefusesKeysThatCompareByAnotherCollation(): void
    {
        $this->store->pdo()->exec('ALTER TABLE onceonly_ops MODIFY op_key VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL');
        $this->expectException(DatabaseError::class);
        $this->expectExceptionMessage('onceonly_ops.op_key compares by utf8mb4_unicode_ci');
        $this->store->migrate();
    }

    public function testAClaimInTheCallersTransactionTakesAQueuedRecordThroughTheLockingRead(): void
    {
        $this->assertTrue($this->store->enqueue('job', 'k', Payload::none()));
        $pdo = $this->store->pdo();
        $pdo->beginTransaction();
        $c = $this->claimedHere($this->store->claim('job', 'k', 'w1', Payload::none(), 30_000, $pdo));
        $pdo->commit();
        $this->assertSame([1, 1], [$c->token, $c->attempts]);
    }

    public function testAValueTooLongForItsColumnIsRefused(): void
    {
        $this->expectException(DatabaseError::class);
        $this->store->claim(str_repeat('j', 129), 'k', 'w1', Payload::none(), 30_000);
    }

    private function claimedHere(mixed $c): Claim
    {
        $this->assertInstanceOf(Claim::class, $c);
        return $c;
    }
}
