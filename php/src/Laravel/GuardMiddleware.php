<?php

declare(strict_types=1);

namespace Onceonly\Laravel;

use Illuminate\Support\Facades\DB;
use Illuminate\Support\Facades\Log;
use Onceonly\EffectCtx;
use Onceonly\Exception\LostClaim;
use Onceonly\Exception\PayloadMismatch;
use Onceonly\Guard;
use Onceonly\Outcome;

/**
 * The job middleware that guards handle() (see Guarded): claims the
 * operation before handle() runs, records what handle() reported under the
 * claim's fencing token, and settles the queued job as Laravel expects:
 *
 * - done (now or by an earlier delivery): the job ends;
 * - retry_later (not sent, or unknown and safe to redo): `release($delay)`,
 *   the record's backoff in seconds;
 * - in_progress (another worker holds a live claim) or not yet due:
 *   released until the lease or the due time runs out;
 * - failed for good: `fail()` (Laravel's failed jobs list; failed() never
 *   writes the record: a success stands);
 * - held, cancelled: the job ends and the record says why (a person
 *   resolves a held one: `onceonly held`, `php artisan onceonly:held`);
 * - a lost claim: the job ends, nothing written (another worker owns it).
 *
 * handle() returns a Sent (reference and result) or any JSON value; it
 * throws NotSent when nothing went out, PermanentFailure when the
 * destination refused for good; any other exception counts as unknown.
 * A local effect's handle() runs inside DB::transaction on the records'
 * connection, with the claim and the completion.
 */
final class GuardMiddleware
{
    /**
     * @param array<string, mixed>|null $options the job's onceonly() settings for this instance instead of the class's
     *        (a job class whose instances are different operations kinds: the replay's)
     * @param (callable(string): (bool|string))|null $faults a fault hook (tests, the replay): see Guard::withFaults
     */
    public function __construct(private readonly ?array $options = null, private $faults = null)
    {
    }

    public function handle(object $job, callable $next): mixed
    {
        $class = get_class($job);
        $records = app(Records::class);
        $options = $this->options ?? $class::onceonly();
        $conn = $options['connection'] ?? null;
        $timeout = $job->job?->timeout();
        $workerTimeout = config('onceonly.worker_timeout');
        $seconds = $timeout !== null ? (int) $timeout : ($workerTimeout === null ? null : (int) $workerTimeout);
        $spec = Specs::of($class, $seconds, null, $options);
        $guard = new Guard($records->store($conn), $spec);
        if ($this->faults !== null) {
            $guard->withFaults($this->faults);
        }
        $key = $job->operationKey();
        $effect = function (EffectCtx $ctx) use ($job, $next): mixed {
            $job->useOnceonlyClaim($ctx);
            try {
                return $next($job);
            } finally {
                $job->useOnceonlyClaim(null);
            }
        };
        try {
            if ($spec->effect === 'local') {
                $outcome = DB::connection($conn)->transaction(
                    fn () => $guard->runLocal($records->pdo($conn), $key, $job->operationPayload(), $effect),
                );
            } else {
                $outcome = $guard->run(
                    $key,
                    $job->operationPayload(),
                    $effect,
                    method_exists($job, 'lookup') ? fn (EffectCtx $ctx) => $job->lookup($ctx) : null,
                    method_exists($job, 'withdraw') ? fn (string $ref, EffectCtx $ctx) => $job->withdraw($ref, $ctx) : null,
                );
            }
        } catch (LostClaim $e) {
            Log::warning("onceonly: {$e->getMessage()}; this delivery ends, nothing written");
            return null;
        } catch (PayloadMismatch $e) {
            $job->fail($e);
            return null;
        }
        $this->settle($job, $spec->jobType, $key, $outcome);
        return $outcome;
    }

    private function settle(object $job, string $type, string $key, Outcome $outcome): void
    {
        $what = "onceonly: $type:$key $outcome";
        switch ($outcome->kind) {
            case 'done':
                if ($outcome->repeat()) {
                    Log::info("$what (a repeat: done by an earlier delivery)");
                }
                return;
            case 'retry_later':
            case 'in_progress':
                $job->release(self::seconds($outcome->retryAfterMs()));
                return;
            case 'not_due':
                $due = $outcome->fields['due_at_ms'] ?? null;
                $job->release($due === null ? 1 : self::seconds((int) $due - (int) (microtime(true) * 1000)));
                return;
            case 'failed':
                $job->fail(new OperationFailed($what));
                return;
            case 'held':
            case 'withdraw_failed':
                Log::warning("$what; a person resolves it (onceonly held, php artisan onceonly:held)");
                return;
            default:
                Log::info($what);
        }
    }

    /** Milliseconds as the whole seconds release() takes, at least 1. */
    private static function seconds(int $ms): int
    {
        return max(1, (int) ceil($ms / 1000));
    }
}
