<?php

declare(strict_types=1);

namespace Onceonly\Tests\Unit;

use Onceonly\Exception\TimingError;
use Onceonly\JobSpec;
use Onceonly\Tests\Support\Corpus;
use PHPUnit\Framework\TestCase;

/**
 * protocol/corpus/timing.json: the rules every client words alike. The PHP
 * guard has no heartbeat, so the cases with one are not PHP's; the rest
 * that every client runs (clients: rust) are run here, with the settings
 * named as the case names them.
 */
final class TimingCorpusTest extends TestCase
{
    public function testTheSharedCases(): void
    {
        $ran = 0;
        foreach (Corpus::load('protocol/corpus/timing.json')['cases'] as $case) {
            $in = $case['input'];
            if (isset($in['heartbeat']) || isset($in['max_retry_delay']) || isset($in['shutdown_timeout'])) {
                continue;
            }
            $spec = new JobSpec(
                $in['job'],
                'keyed',
                leaseMs: JobSpec::ms($in['lease']),
                timeoutMs: JobSpec::ms($in['timeout']),
                redeliveryTimeoutMs: isset($in['redelivery_timeout']) ? JobSpec::ms($in['redelivery_timeout']) : null,
                redeliverySetting: $in['redelivery_setting'] ?? 'redelivery_timeout',
                lockLifetimeMs: isset($in['lock_lifetime']) ? JobSpec::ms($in['lock_lifetime']) : null,
            );
            $this->assertSame($case['rules'], $spec->brokenTimingRules(), $case['name']);
            try {
                $spec->checkTiming();
                $this->assertNull($case['refused'], $case['name']);
            } catch (TimingError $e) {
                $this->assertSame($case['refused'], $e->getMessage(), $case['name']);
            }
            $ran++;
        }
        $this->assertGreaterThanOrEqual(8, $ran);
        Corpus::say("timing corpus: $ran cases (the heartbeat, Celery and Sidekiq ones are not PHP's)");
    }
}
