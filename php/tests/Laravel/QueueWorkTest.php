<?php

declare(strict_types=1);

namespace Onceonly\Tests\Laravel;

use Onceonly\Tests\Support\LaravelApp;
use PHPUnit\Framework\TestCase;

/**
 * Real `php artisan queue:work redis` workers on the test application
 * (tests/app), MariaDB and Redis: duplicates, a SIGKILL mid-job, a local
 * effect, and the timing check at worker start.
 */
final class QueueWorkTest extends TestCase
{
    private ?LaravelApp $app = null;

    protected function tearDown(): void
    {
        $this->app?->stop();
    }

    public function testDuplicatesToTwoWorkersMakeOneEffect(): void
    {
        $this->app = $app = LaravelApp::onMySql($this);
        $app->artisanOk('test:dispatch', 'SendReceipt', '42', '--times=6');
        $app->worker();
        $app->worker();
        $app->waitForQueue(40);
        $effects = $app->effects();
        $this->assertCount(1, $effects, "one effect for six deliveries:\n" . $app->logs());
        $this->assertSame(['order-42', 'send_receipt:order-42'], array_slice($effects[0], 0, 2));
        $r = $app->record('send_receipt', 'order-42');
        $this->assertSame(['completed', 1, 'receipt-42', '{"order":"42"}'], [$r['state'], (int) $r['token'], $r['external_ref'], $r['result']]);
        $this->assertSame(0, $app->queued(), 'every delivery finished');
    }

    /** @return iterable<string, array{string}> */
    public static function kinds(): iterable
    {
        yield 'opaque, hold' => ['opaque'];
        yield 'keyed' => ['keyed'];
    }

    /** @dataProvider kinds */
    public function testAWorkerKilledMidJobComesBackAfterRetryAfterAndActsOnce(string $kind): void
    {
        $hang = tempnam(sys_get_temp_dir(), 'laravel-hang-');
        $this->app = $app = LaravelApp::onMySql($this, ['TEST_EFFECT' => $kind]);
        $app->artisanOk('test:dispatch', 'SendReceipt', '7');
        $pid = $app->worker(['TEST_HANG_FILE' => $hang]);
        $deadline = microtime(true) + 20;
        while (!$app->effects() && microtime(true) < $deadline) {
            usleep(50_000);
        }
        $this->assertCount(1, $app->effects(), "the first worker acted:\n" . $app->logs());
        posix_kill($pid, SIGKILL); // after the effect, before the completion
        unlink($hang);
        $this->assertSame('claimed', $app->record('send_receipt', 'order-7')['state']);
        // The job is reserved by a dead worker: Redis hands it out again after
        // retry_after (5 s); the claim's lease (6 s) decides what then happens.
        $app->worker();
        $deadline = microtime(true) + 40;
        while ((($r = $app->record('send_receipt', 'order-7'))['state'] === 'claimed' || $app->queued() > 0) && microtime(true) < $deadline) {
            usleep(200_000);
        }
        $r = $app->record('send_receipt', 'order-7');
        $effects = $app->effects();
        if ($kind === 'opaque') {
            $this->assertSame('held', $r['state'], $app->logs());
            $this->assertCount(1, $effects, 'the effect happened once: nobody could tell, so it was held');
            $this->assertStringContainsString('went past its lease', (string) $r['error']);
            $this->assertStringContainsString('send_receipt:order-7', $app->artisanOk('onceonly:held'));
        } else {
            $this->assertSame('completed', $r['state'], $app->logs());
            $this->assertSame([2, 2], [(int) $r['token'], (int) $r['attempts']]);
            $this->assertCount(2, $effects, 'redone after the lease');
            $this->assertSame($effects[0][1], $effects[1][1], 'with the same idempotency key: once at a destination that dedups');
            $this->assertNotSame($effects[0][2], $effects[1][2], 'by another worker process');
        }
        $this->assertSame(0, $app->queued());
    }

    public function testALocalEffectCommitsWithItsRecordInTheJobsTransaction(): void
    {
        $this->app = $app = LaravelApp::onMySql($this);
        $app->artisanOk('test:dispatch', 'CreditLedger', 'entry-1', '5', '--times=4');
        $app->artisanOk('test:dispatch', 'CreditLedger', '--', 'entry-2', '-3');
        $app->worker([], '--tries=1');
        $app->waitForQueue(40);
        $rows = $app->pdo()->query('SELECT entry, amount FROM ledger ORDER BY entry')->fetchAll(\PDO::FETCH_NUM);
        $this->assertSame([['entry-1', 5]], array_map(fn ($r) => [$r[0], (int) $r[1]], $rows), $app->logs());
        $this->assertSame('completed', $app->record('credit_ledger', 'entry-1')['state']);
        $this->assertNull($app->record('credit_ledger', 'entry-2'), 'the failed effect rolled its claim back with it');
    }

    public function testAWorkerWhoseRetryAfterIsShorterThanItsTimeoutDoesNotStart(): void
    {
        $this->app = $app = LaravelApp::onMySql($this, ['QUEUE_RETRY_AFTER' => '3']);
        $app->artisanOk('test:dispatch', 'SendReceipt', '9');
        [$code, $out, $err] = $app->artisan([], 'queue:work', 'redis', '--timeout=4', '--stop-when-empty');
        $this->assertSame(1, $code);
        $said = preg_replace('/\s+/', ' ', $out . $err);
        $this->assertStringContainsString('timing rule broken: worker queue:work redis: queue redelivery timeout (3s) must be longer than the job timeout (4s) [change queue.connections.redis.retry_after or --timeout]', $said);
        $this->assertStringContainsString('job send_receipt: queue redelivery timeout (3s) must be longer than the job timeout (4s) [change queue.connections.redis.retry_after or SendReceipt::$timeout]', $said);
        $this->assertSame([], $app->effects(), 'nothing ran');
    }

    public function testALeaseOrALockShorterThanTheJobTimeoutStopsTheWorker(): void
    {
        $this->app = $app = LaravelApp::onMySql($this, ['QUEUE_RETRY_AFTER' => '100', 'ONCEONLY_JOBS' => 'App\Jobs\BadLease']);
        [$code, $out, $err] = $app->artisan([], 'queue:work', 'redis', '--timeout=60', '--stop-when-empty');
        $this->assertSame(1, $code);
        $said = preg_replace('/\s+/', ' ', $out . $err);
        // The class's own $timeout (10 s) is what runs it, not --timeout.
        $this->assertStringContainsString('job bad_lease: job timeout (10s) must be shorter than the lease (5s), or a heartbeat must renew the lease [change BadLease::$timeout, BadLease::onceonly()[\'lease\'] or heartbeat]', $said);
        $this->assertStringContainsString("job bad_lease: lock lifetime (10s) must be longer than the job timeout (10s) [change BadLease::onceonly()['lock'] (the Cache::lock lifetime) or BadLease::\$timeout]", $said);
    }

    public function testAWorkerWithTheRulesKeptStarts(): void
    {
        $this->app = $app = LaravelApp::onMySql($this, ['QUEUE_RETRY_AFTER' => '100']);
        [$code, $out, $err] = $app->artisan([], 'queue:work', 'redis', '--timeout=60', '--stop-when-empty');
        $this->assertSame(0, $code, $out . $err);
    }

    public function testArtisanMigrateCreatesTheTablesOnce(): void
    {
        $url = \Onceonly\Tests\Support\Databases::mysqlUrl($this);
        $this->app = $app = new LaravelApp($this, substr($url, strrpos($url, '/') + 1));
        $this->assertStringContainsString('create_onceonly_tables', $app->artisanOk('migrate'));
        $this->assertStringContainsString('Nothing to migrate', $app->artisanOk('migrate'));
        $versions = $app->pdo()->query('SELECT version FROM onceonly_migrations ORDER BY version')->fetchAll(\PDO::FETCH_COLUMN);
        $this->assertSame([1, 2], array_map('intval', $versions));
        $this->assertNull($app->record('send_receipt', 'none'));
    }
}
