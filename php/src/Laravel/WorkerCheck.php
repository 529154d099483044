<?php

declare(strict_types=1);

namespace Onceonly\Laravel;

use Illuminate\Contracts\Config\Repository as Config;
use Onceonly\Exception\TimingError;

/**
 * The timing rules of docs/DESIGN.md section 4 with Laravel's own numbers,
 * checked when `queue:work` (or `queue:listen`) starts, for every job class
 * listed in config('onceonly.jobs'):
 *
 * - the job timeout (the class's $timeout, else the worker's --timeout)
 *   shorter than the lease (the PHP guard runs no heartbeat; the worker
 *   kills the process at the timeout, so it cannot act after its lease);
 * - the queue connection's retry_after longer than that timeout (else the
 *   queue hands the job to a second worker while the first still runs it),
 *   and longer than the worker's --timeout;
 * - a Cache::lock lifetime the job declares (onceonly()['lock']) longer
 *   than that timeout.
 *
 * A broken rule stops the worker: TimingError, one line per rule naming the
 * job type, both numbers and the settings to change.
 */
final class WorkerCheck
{
    public function __construct(private readonly Config $config)
    {
    }

    /**
     * @param list<class-string> $jobs
     * @return list<string> the broken rules, worded as every client words them
     */
    public function broken(string $connection, int $workerTimeout, array $jobs): array
    {
        $retryAfter = (int) ($this->config->get("queue.connections.$connection.retry_after") ?? 90);
        $where = "queue.connections.$connection.retry_after";
        $lines = [];
        if ($this->config->get("queue.connections.$connection.driver") !== 'sync' && $retryAfter <= $workerTimeout) {
            $d = [\Onceonly\Decide::class, 'humanDuration'];
            $lines[] = "worker queue:work $connection: queue redelivery timeout ({$d($retryAfter * 1000)}) must be longer than the job timeout ({$d($workerTimeout * 1000)}) [change $where or --timeout]";
        }
        foreach ($jobs as $class) {
            $spec = Specs::of($class, $workerTimeout, [$retryAfter, $where]);
            array_push($lines, ...$spec->brokenTimingRules());
        }
        return array_values(array_unique($lines));
    }

    /** Throws TimingError when a rule is broken. */
    public function check(string $connection, int $workerTimeout, array $jobs): void
    {
        $lines = $this->broken($connection, $workerTimeout, $jobs);
        if ($lines) {
            throw new TimingError('timing rule broken: ' . implode('; ', $lines));
        }
    }
}
