<?php

declare(strict_types=1);

namespace Onceonly;

use Onceonly\Exception\InvalidInput;
use Onceonly\Exception\TimingError;

/**
 * One job type's settings: its effect kind (keyed, lookup, opaque, local),
 * the stale-claim policy of an opaque effect (hold, at_least_once,
 * at_most_once), retries under one claim, the lease and the job timeout
 * (ms), and the numbers the timing rules of docs/DESIGN.md section 4 hold
 * them against (the queue's redelivery timeout, a lock's lifetime), each
 * named as the user sets it.
 *
 * The PHP guard runs no heartbeat (a PHP worker runs one job at a time, on
 * one thread): the job timeout must be shorter than the lease.
 */
final class JobSpec
{
    public const KINDS = ['keyed', 'lookup', 'opaque', 'local'];
    public const POLICIES = ['hold', 'at_least_once', 'at_most_once'];

    public function __construct(
        public readonly string $jobType,
        public readonly string $effect,
        public readonly ?string $onStale = null,
        public readonly int $maxRetries = 2,
        public readonly int $leaseMs = 30_000,
        public readonly int $timeoutMs = 10_000,
        public readonly ?int $redeliveryTimeoutMs = null,
        public readonly string $redeliverySetting = 'redelivery_timeout',
        public readonly ?int $lockLifetimeMs = null,
        public readonly string $lockSetting = 'lock_lifetime',
        public readonly string $timeoutSetting = 'timeout',
        public readonly string $leaseSetting = 'lease',
    ) {
        Keys::validateJobType($jobType);
        if (!in_array($effect, self::KINDS, true)) {
            throw new InvalidInput("effect kind \"$effect\" is not one of " . implode(', ', self::KINDS));
        }
        if ($effect === 'opaque' && !in_array($onStale ?? 'hold', self::POLICIES, true)) {
            throw new InvalidInput("stale-claim policy \"$onStale\" is not one of " . implode(', ', self::POLICIES));
        }
        if ($effect !== 'opaque' && $onStale !== null) {
            throw new InvalidInput("a stale-claim policy is for opaque effects; a $effect effect redoes safely");
        }
        if ($maxRetries < 0) {
            throw new InvalidInput("max_retries $maxRetries must be 0 or more");
        }
    }

    /** The stale-claim policy in force (opaque: hold unless given). */
    public function policy(): ?string
    {
        return $this->effect === 'opaque' ? ($this->onStale ?? 'hold') : null;
    }

    /** @return array{effect: string, on_stale: ?string, max_retries: int, lease_ms: int, timeout_ms: int} the machine's view */
    public function machineJob(): array
    {
        return [
            'effect' => $this->effect,
            'on_stale' => $this->policy(),
            'max_retries' => $this->effect === 'local' ? 0 : $this->maxRetries,
            'lease_ms' => $this->leaseMs,
            'timeout_ms' => $this->timeoutMs,
        ];
    }

    /**
     * Each broken rule as a sentence with both numbers and, in brackets, the
     * settings to change; empty when all hold (protocol/corpus/timing.json).
     *
     * @return list<string>
     */
    public function brokenTimingRules(): array
    {
        $d = [Decide::class, 'humanDuration'];
        $broken = [];
        [$lease, $timeout] = [$this->leaseMs, $this->timeoutMs];
        if ($lease <= 0 || $timeout <= 0) {
            $broken[] = "lease ({$d($lease)}) and timeout ({$d($timeout)}) must both be above zero [change {$this->leaseSetting} or {$this->timeoutSetting}]";
        }
        if ($timeout >= $lease) {
            $broken[] = "job timeout ({$d($timeout)}) must be shorter than the lease ({$d($lease)}), or a heartbeat must renew the lease [change {$this->timeoutSetting}, {$this->leaseSetting} or heartbeat]";
        }
        $r = $this->redeliveryTimeoutMs;
        if ($r !== null && $r <= $timeout) {
            $broken[] = "queue redelivery timeout ({$d($r)}) must be longer than the job timeout ({$d($timeout)}) [change {$this->redeliverySetting} or {$this->timeoutSetting}]";
        }
        $lock = $this->lockLifetimeMs;
        if ($lock !== null && $lock <= $timeout) {
            $broken[] = "lock lifetime ({$d($lock)}) must be longer than the job timeout ({$d($timeout)}) [change {$this->lockSetting} or {$this->timeoutSetting}]";
        }
        return array_map(fn (string $rule) => "job {$this->jobType}: $rule", $broken);
    }

    /** Throws TimingError (the worker must not start) when a rule is broken. */
    public function checkTiming(): void
    {
        $lines = $this->brokenTimingRules();
        if ($lines) {
            throw new TimingError('timing rule broken: ' . implode('; ', $lines));
        }
    }

    /** A duration as the command line writes it (`500ms`, `2s`, `1m 30s`, `1h`) in ms. */
    public static function ms(string $duration): int
    {
        $total = 0;
        $units = ['ms' => 1, 's' => 1000, 'm' => 60_000, 'h' => 3_600_000, 'd' => 86_400_000];
        if (!preg_match_all('/(\d+)\s*(ms|s|m|h|d)\b/', $duration, $m, PREG_SET_ORDER) || trim(preg_replace('/(\d+)\s*(ms|s|m|h|d)\b/', '', $duration)) !== '') {
            throw new InvalidInput("duration \"$duration\" is not like 500ms, 2s, 5m or 1m 30s");
        }
        foreach ($m as [, $n, $unit]) {
            $total += (int) $n * $units[$unit];
        }
        return $total;
    }
}
