<?php

declare(strict_types=1);

namespace Onceonly\Tests\Unit;

use Onceonly\Decide;
use Onceonly\Payload;
use Onceonly\Tests\Support\Corpus;
use PHPUnit\Framework\TestCase;

/**
 * Every case of protocol/decisions.json on this client's machine (Decide):
 * the recorded answers fed in, each step it returns compared with the
 * recorded one exactly (canonical JSON, so 1 is not "1" and null is not
 * missing), failing on the first difference with the case's name and both
 * steps.
 */
final class DecisionsTest extends TestCase
{
    public function testEveryCaseStepByStep(): void
    {
        $path = Corpus::root() . '/protocol/decisions.json';
        $text = file_get_contents($path);
        $asData = json_decode($text, true, 512, JSON_THROW_ON_ERROR);
        $asJson = json_decode($text, false, 512, JSON_THROW_ON_ERROR);
        $cases = $asData['cases'];
        $this->assertSame($asData['count'], count($cases), 'count says how many cases there are');
        $this->assertGreaterThan(100, count($cases), 'the file lost its cases');
        $steps = 0;
        foreach ($cases as $i => $case) {
            $decide = new Decide($case['job'], $case['entry']);
            $answer = null;
            foreach ($case['steps'] as $n => $recorded) {
                $step = $decide->next($answer);
                $want = Payload::of($asJson->cases[$i]->steps[$n]->step)->json;
                $got = Payload::of($step)->json;
                if ($want !== $got) {
                    $this->fail("{$case['name']}: step $n differs\n  recorded: $want\n  this machine: $got");
                }
                $answer = $recorded['answer'] ?? null;
                $steps++;
            }
            $last = end($case['steps'])['step']['do'];
            $this->assertContains($last, ['finish', 'error'], "{$case['name']} ends");
            $this->assertSame(Payload::of($step)->json, Payload::of($decide->next(null))->json, "{$case['name']}: the end repeats");
        }
        $this->addToAssertionCount($steps);
        Corpus::say(sprintf('decisions: %d cases', count($cases)));
    }

    public function testHumanDurationsAsRustWritesThem(): void
    {
        $this->assertSame('10s', Decide::humanDuration(10_000));
        $this->assertSame('1m 30s', Decide::humanDuration(90_000));
        $this->assertSame('1s 500ms', Decide::humanDuration(1_500));
        $this->assertSame('1h 5m', Decide::humanDuration(3_900_000));
        $this->assertSame('2days 1h', Decide::humanDuration(2 * 86_400_000 + 3_600_000));
    }
}
