<?php

declare(strict_types=1);

namespace Onceonly\Laravel;

use Onceonly\Exception\InvalidInput;
use Onceonly\JobSpec;

/** A guarded job class's JobSpec, from its onceonly() and its own $timeout, named as the Laravel user sets each. */
final class Specs
{
    /** Laravel's default `queue:work --timeout`. */
    public const WORKER_TIMEOUT = 60;

    /**
     * @param class-string $class a job using Guarded
     * @param int|null $workerTimeout the worker's --timeout (seconds), for a job without its own $timeout
     * @param array{int, string}|null $retryAfter the queue connection's retry_after (seconds) and where it is set
     */
    public static function of(string $class, ?int $workerTimeout = null, ?array $retryAfter = null, ?array $options = null): JobSpec
    {
        if ($options === null && !method_exists($class, 'onceonly')) {
            throw new InvalidInput("$class does not use Onceonly\\Laravel\\Guarded (no onceonly())");
        }
        $o = $options ?? $class::onceonly();
        $own = self::ownTimeout($class);
        $timeout = $own ?? $workerTimeout ?? self::WORKER_TIMEOUT;
        $lease = isset($o['lease']) ? (int) $o['lease'] : $timeout + 60;
        $short = self::short($class);
        return new JobSpec(
            jobType: (string) ($o['job'] ?? throw new InvalidInput("$class::onceonly() names no 'job' (the job type)")),
            effect: (string) ($o['effect'] ?? throw new InvalidInput("$class::onceonly() names no 'effect' (keyed, lookup, opaque or local)")),
            onStale: $o['on_stale'] ?? null,
            maxRetries: (int) ($o['max_retries'] ?? 2),
            leaseMs: $lease * 1000,
            timeoutMs: $timeout * 1000,
            redeliveryTimeoutMs: $retryAfter === null ? null : $retryAfter[0] * 1000,
            redeliverySetting: $retryAfter[1] ?? 'retry_after',
            lockLifetimeMs: isset($o['lock']) ? (int) $o['lock'] * 1000 : null,
            lockSetting: "$short::onceonly()['lock'] (the Cache::lock lifetime)",
            timeoutSetting: $own !== null ? "$short::\$timeout" : '--timeout',
            leaseSetting: "$short::onceonly()['lease']",
        );
    }

    /** The job class's own $timeout (seconds), or null. */
    public static function ownTimeout(string $class): ?int
    {
        $defaults = (new \ReflectionClass($class))->getDefaultProperties();
        return isset($defaults['timeout']) ? (int) $defaults['timeout'] : null;
    }

    private static function short(string $class): string
    {
        return substr($class, (int) strrpos($class, '\\') + ($class[0] === '\\' ? 0 : (str_contains($class, '\\') ? 1 : 0)));
    }
}
