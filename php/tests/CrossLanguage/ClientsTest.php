<?php

declare(strict_types=1);

namespace Onceonly\Tests\CrossLanguage;

use Onceonly\Exception\InjectedCrash;
use Onceonly\Guard;
use Onceonly\JobSpec;
use Onceonly\Payload;
use Onceonly\Sent;
use Onceonly\State;
use Onceonly\Store\Store;
use Onceonly\Tests\Support\Corpus;
use Onceonly\Tests\Support\Databases;
use PHPUnit\Framework\TestCase;

/**
 * PHP, Python and Ruby guards on the same records: a PHP claim that died
 * after its effect is taken over and completed by Python or Ruby (keyed:
 * the same idempotency key), and what they completed is a repeat for PHP.
 * Python on SQLite (the machine's Python has no MySQL driver outside the
 * project's venv), Ruby on SQLite and MariaDB (Debian's mysql2).
 */
final class ClientsTest extends TestCase
{
    private const PAYLOAD = '{"amount":5,"to":"a@example.com"}';

    /** @return iterable<string, array{string, string}> */
    public static function clients(): iterable
    {
        yield 'python on sqlite' => ['python', 'sqlite'];
        yield 'ruby on sqlite' => ['ruby', 'sqlite'];
        yield 'ruby on mariadb' => ['ruby', 'mysql'];
    }

    /** @dataProvider clients */
    public function testAPhpClaimThatDiedAfterItsEffectIsRedoneByTheOtherClientWithTheSameKey(string $client, string $db): void
    {
        [$store, $url] = $this->database($db);
        $g = (new Guard($store, new JobSpec('mail', 'keyed', leaseMs: 1_000, timeoutMs: 900), 'php-worker'))
            ->withFaults(fn (string $p) => $p === 'after_effect');
        try {
            $g->run('k', Payload::parse(self::PAYLOAD), fn () => new Sent('item-1', ['id' => 'item-1']));
            $this->fail('no crash');
        } catch (InjectedCrash) {
        }
        usleep(1_100_000);
        $said = $this->client($client, $url, 'run');
        $this->assertSame(['done', 'mail:k', 2, 2], [$said['outcome'], $said['idempotency_key'], $said['token'], $said['attempt']], json_encode($said));
        $r = $store->get('mail', 'k')->record;
        $this->assertSame([State::Completed, 2, "$client-worker", 'item-1'], [$r->state, $r->token, $r->owner, $r->externalRef]);
        $again = $g->run('k', Payload::parse(self::PAYLOAD), fn () => $this->fail('sent again'));
        $this->assertTrue($again->repeat());
        $this->assertEquals(['id' => 'item-1', 'by' => $client], $again->result());
        $this->assertSame(['take_over'], array_map(fn ($e) => $e->event, $store->history('mail', 'k')));
    }

    /** @dataProvider clients */
    public function testWhatTheOtherClientCompletedIsARepeatForPhp(string $client, string $db): void
    {
        [$store, $url] = $this->database($db);
        $said = $this->client($client, $url, 'run');
        $this->assertSame(['done', 1], [$said['outcome'], $said['token']]);
        $out = (new Guard($store, new JobSpec('mail', 'keyed'), 'php-worker'))
            ->run('k', ['to' => 'a@example.com', 'amount' => 5], fn () => $this->fail('sent again'));
        $this->assertTrue($out->repeat());
        $this->assertEquals(['id' => 'item-1', 'by' => $client], $out->result());
        $this->assertSame('item-1', $out->externalRef());
    }

    /** @return array{Store, string} */
    private function database(string $kind): array
    {
        if ($kind === 'mysql') {
            $url = Databases::mysqlUrl($this);
        } else {
            $dir = sys_get_temp_dir() . '/laravel-clients-' . bin2hex(random_bytes(4));
            mkdir($dir);
            $url = "sqlite://$dir/o.db";
        }
        $store = Store::connect($url);
        $store->migrate();
        return [$store, $url];
    }

    /** Runs one delivery of mail:k in the other client: what it said, as JSON. */
    private function client(string $client, string $url, string $what): array
    {
        $root = Corpus::root();
        if ($client === 'python') {
            $code = <<<'PY'
import json, sys, onceonly
store = onceonly.connect(sys.argv[1])
guard = onceonly.Guard(store, onceonly.JobSpec.build("mail", effect="keyed", lease="5s", timeout="2s"), owner="python-worker")
seen = {}
def send(ctx):
    seen.update(idempotency_key=ctx.idempotency_key, token=ctx.token, attempt=ctx.attempt)
    return onceonly.Sent("item-1", {"id": "item-1", "by": "python"})
out = guard.run("k", onceonly.Payload.parse(sys.argv[2]), send)
print(json.dumps(dict(seen, outcome=out.name)))
PY;
            $cmd = ['python3', '-c', $code, $url, self::PAYLOAD];
            $env = ['PYTHONPATH' => "$root/python"];
        } else {
            $code = <<<'RB'
require "json"
require "onceonly"
store = Onceonly.connect(ARGV[0])
guard = Onceonly::Guard.new(store, Onceonly::JobSpec.new(job_type: "mail", effect: :keyed, lease: 5, timeout: 2), owner: "ruby-worker")
seen = {}
out = guard.run("k", JSON.parse(ARGV[1])) do |ctx|
  seen = { "idempotency_key" => ctx.idempotency_key, "token" => ctx.token, "attempt" => ctx.attempt }
  Onceonly::Done.new(external_ref: "item-1", result: { "id" => "item-1", "by" => "ruby" })
end
puts JSON.generate(seen.merge("outcome" => out.class.name.split("::").last.downcase))
RB;
            $cmd = ['ruby', "-I$root/ruby/lib", '-e', $code, $url, self::PAYLOAD];
            $env = [];
        }
        $p = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, null, array_merge(getenv(), $env));
        $out = stream_get_contents($pipes[1]);
        $err = stream_get_contents($pipes[2]);
        $this->assertSame(0, proc_close($p), "$client exited non-zero: $out$err");
        $lines = array_values(array_filter(explode("\n", trim($out))));
        return json_decode((string) end($lines), true, 512, JSON_THROW_ON_ERROR);
    }
}
