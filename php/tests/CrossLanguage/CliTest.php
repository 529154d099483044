<?php

declare(strict_types=1);

namespace Onceonly\Tests\CrossLanguage;

use Onceonly\EffectCtx;
use Onceonly\Exception\InjectedCrash;
use Onceonly\Guard;
use Onceonly\JobSpec;
use Onceonly\Payload;
use Onceonly\Sent;
use Onceonly\State;
use Onceonly\Store\Store;
use Onceonly\Tests\Support\Cli;
use Onceonly\Tests\Support\Databases;
use PHPUnit\Framework\TestCase;

/**
 * PHP and the Rust CLI on the same database (MariaDB and SQLite): a record
 * PHP wrote is read, taken over and resolved by Rust, and one Rust wrote is
 * claimed and taken over by PHP.
 */
final class CliTest extends TestCase
{
    private const PAYLOAD = '{"amount":5,"to":"a@example.com"}';

    /** @var list<resource> */
    private array $servers = [];

    protected function tearDown(): void
    {
        foreach ($this->servers as $p) {
            proc_terminate($p, 9);
            proc_close($p);
        }
    }

    /** @return iterable<string, array{string}> */
    public static function databases(): iterable
    {
        yield 'mariadb' => ['mysql'];
        yield 'sqlite' => ['sqlite'];
    }

    /** @return array{Store, string} a fresh, empty database: the PHP store and the URL the CLI takes */
    private function database(string $kind): array
    {
        if ($kind === 'mysql') {
            $url = Databases::mysqlUrl($this);
            return [Store::connect($url), $url];
        }
        $dir = sys_get_temp_dir() . '/laravel-x-' . bin2hex(random_bytes(4));
        mkdir($dir);
        return [Store::connect("sqlite://$dir/o.db"), "sqlite://$dir/o.db"];
    }

    /** @dataProvider databases */
    public function testPhpMigratesAndRustReadsWhatPhpCompleted(string $kind): void
    {
        [$store, $url] = $this->database($kind);
        $store->migrate();
        $this->assertStringContainsString('migrated', Cli::ok($this, $url, 'migrate'));
        $g = new Guard($store, new JobSpec('mail', 'keyed'), 'php-worker');
        $out = $g->run('k', Payload::parse(self::PAYLOAD), fn () => new Sent('item-1', ['id' => 'item-1']));
        $this->assertTrue($out->isDone());
        [$row] = Cli::lines(Cli::ok($this, $url, 'inspect', '--json'));
        $this->assertSame(['mail', 'k', 'completed', 1, 'php-worker', 'item-1', '{"id":"item-1"}'], [
            $row['job'], $row['key'], $row['state'], $row['token'], $row['owner'], $row['external_ref'], $row['result'],
        ]);
        $this->assertSame(Payload::parse(self::PAYLOAD)->fingerprint, $row['fingerprint']);
        $this->assertSame(self::PAYLOAD, $row['payload']);
    }

    /** @dataProvider databases */
    public function testRustMigratesAndEnqueuesAndPhpClaimsTheQueuedRow(string $kind): void
    {
        [$store, $url] = $this->database($kind);
        Cli::ok($this, $url, 'migrate');
        $store->migrate(); // nothing to do
        Cli::ok($this, $url, 'enqueue', '--job', 'mail', '--key', 'k', '--payload', '{ "to": "a@example.com", "amount": 5 }');
        $sends = 0;
        $g = new Guard($store, new JobSpec('mail', 'keyed'), 'php-worker');
        $out = $g->run('k', ['amount' => 5, 'to' => 'a@example.com'], function (EffectCtx $ctx) use (&$sends) {
            $sends++;
            $this->assertSame([1, 1], [$ctx->token, $ctx->attempt]);
            return new Sent('item-9', null);
        });
        $this->assertTrue($out->isDone());
        $this->assertSame(1, $sends);
        [$row] = Cli::lines(Cli::ok($this, $url, 'inspect', '--json'));
        $this->assertSame(['completed', 'item-9', 'null'], [$row['state'], $row['external_ref'], $row['result']]);
    }

    /** @dataProvider databases */
    public function testAPhpClaimPastItsLeaseIsSettledByTheRustRelayAndResolvedByTheCli(string $kind): void
    {
        [$store, $url] = $this->database($kind);
        $store->migrate();
        [$base] = $this->server();
        $spec = new JobSpec('mail', 'opaque', 'hold', 0, 1_000, 900);
        $g = (new Guard($store, $spec, 'php-worker'))->withFaults(fn (string $p) => $p === 'after_effect');
        try {
            $g->run('k', Payload::parse(self::PAYLOAD), fn () => new Sent('item-1', null));
            $this->fail('no crash');
        } catch (InjectedCrash) {
        }
        usleep(1_100_000); // the lease (1s) runs out on the database's clock
        [$stuck] = Cli::lines(Cli::ok($this, $url, 'stuck', '--json'));
        $this->assertSame(['k', 'php-worker', 1], [$stuck['key'], $stuck['owner'], $stuck['token']]);
        Cli::ok($this, $url, 'run', '--job', 'mail', '--http', $base, '--effect', 'opaque', '--on-stale', 'hold',
            '--lease', '1s', '--timeout', '900ms', '--drain');
        [$held] = Cli::lines(Cli::ok($this, $url, 'held', '--json'));
        $this->assertSame(['k', 'held', 2], [$held['key'], $held['state'], $held['token']]);
        $this->assertSame(State::Held, $store->get('mail', 'k')->record->state);
        Cli::ok($this, $url, 'resolve', '--job', 'mail', '--key', 'k', '--as', 'completed', '--ref', 'item-1', '--reason', 'found it at the provider');
        $out = (new Guard($store, $spec, 'php-2'))->run('k', Payload::parse(self::PAYLOAD), fn () => $this->fail('sent again'));
        $this->assertTrue($out->repeat());
        $this->assertSame('item-1', $out->externalRef());
        $events = array_map(fn ($e) => $e->event, $store->history('mail', 'k'));
        $this->assertSame(['take_over', 'resolved'], $events);
    }

    /** @dataProvider databases */
    public function testARustClaimKilledMidRequestIsTakenOverByPhpWithTheSameKey(string $kind): void
    {
        [$store, $url] = $this->database($kind);
        Cli::ok($this, $url, 'migrate');
        [$base, $state] = $this->server();
        Cli::ok($this, $url, 'enqueue', '--job', 'mail', '--key', 'k', '--payload', self::PAYLOAD);
        touch("$state.hang");
        $relay = proc_open([Cli::path($this), '--db', $url, 'run', '--job', 'mail', '--http', $base, '--effect', 'keyed',
            '--lease', '2s', '--timeout', '1500ms'], [1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes);
        for ($i = 0; $i < 100 && !Cli::items($state); $i++) {
            usleep(50_000);
        }
        $this->assertCount(1, Cli::items($state), 'the relay sent');
        $pid = proc_get_status($relay)['pid'];
        posix_kill($pid, SIGKILL); // mid-request: sent, not recorded
        proc_close($relay);
        unlink("$state.hang");
        $r = $store->get('mail', 'k')->record;
        $this->assertSame([State::Claimed, 1], [$r->state, $r->token]);
        usleep(2_100_000);
        $g = new Guard($store, new JobSpec('mail', 'keyed', leaseMs: 5_000, timeoutMs: 2_000), 'php-worker');
        $out = $g->run('k', Payload::parse(self::PAYLOAD), function (EffectCtx $ctx) use ($state) {
            // The same destination, deduplicating on the same key.
            $id = array_search($ctx->idempotencyKey, array_column(Cli::items($state), 'key', 'id'), true);
            $this->assertNotFalse($id, 'the item the Rust relay sent, under the key PHP sends');
            return new Sent($id, ['id' => $id]);
        });
        $this->assertTrue($out->isDone());
        $this->assertSame('item-1', $out->externalRef());
        $this->assertCount(1, Cli::items($state));
        [$row] = Cli::lines(Cli::ok($this, $url, 'inspect', '--json'));
        $this->assertSame(['completed', 2, 2, 'php-worker'], [$row['state'], $row['token'], $row['attempts'], $row['owner']]);
        $history = Cli::lines(Cli::ok($this, $url, 'history', '--job', 'mail', '--key', 'k', '--json'));
        $this->assertSame(['take_over'], array_column($history, 'event'));
    }

    /** @return array{string, string} */
    private function server(): array
    {
        [$base, $state, $proc] = Cli::destination();
        $this->servers[] = $proc;
        return [$base, $state];
    }
}
