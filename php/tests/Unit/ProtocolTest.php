<?php

declare(strict_types=1);

namespace Onceonly\Tests\Unit;

use Onceonly\Protocol;
use Onceonly\Store\PgStore;
use Onceonly\Tests\Support\Corpus;
use PHPUnit\Framework\TestCase;

/** The moves this client builds are the transitions of protocol/transitions.json. */
final class ProtocolTest extends TestCase
{
    public function testEveryMoveIsTheTransitionOfItsName(): void
    {
        $moves = [];
        foreach (Corpus::load('protocol/transitions.json')['transitions'] as $t) {
            if ($t['statement'] === 'move') {
                $moves[$t['name']] = [$t['from'], $t['to'], $t['cancel'] === 'not_requested'];
            }
        }
        $ours = array_map(static fn ($r) => [$r[0]->value, $r[1]->value, $r[2]], Protocol::MOVES);
        ksort($moves);
        ksort($ours);
        $this->assertSame($moves, $ours);
    }

    public function testTheMigrationLockKeyIsTheRustStores(): void
    {
        // FNV-1a 64 of "onceonly.migrate:onceonly", as Python's migrate_lock_key computes it.
        $expected = trim((string) shell_exec('python3 -c ' . escapeshellarg(
            'h=0xCBF29CE484222325' . "\n" .
            'for b in b"onceonly.migrate:onceonly":' . "\n" .
            ' h^=b; h=(h*0x100000001B3)&0xFFFFFFFFFFFFFFFF' . "\n" .
            'print(h-(1<<64) if h>=1<<63 else h)'
        )));
        $this->assertSame($expected, PgStore::migrateLockKey('onceonly'));
    }
}
