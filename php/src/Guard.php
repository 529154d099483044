<?php

declare(strict_types=1);

namespace Onceonly;

use Onceonly\Exception\EffectTimeout;
use Onceonly\Exception\InjectedCrash;
use Onceonly\Exception\LocalEffectFailed;
use Onceonly\Exception\LostClaim;
use Onceonly\Exception\NotFound;
use Onceonly\Exception\NotSent;
use Onceonly\Exception\OutcomeUnknown;
use Onceonly\Exception\PayloadMismatch;
use Onceonly\Exception\PermanentFailure;
use Onceonly\Store\Store;

/**
 * Runs a job's effect at most as often as its kind and policy allow, on the
 * records every client shares: the interpreter of the decisions machine
 * (Decide). Each step the machine asks for is one statement, one audit
 * append, one call of the effect (or its lookup, or its withdraw), a sleep
 * or a fault hook; the machine decides what comes next from the answer.
 *
 * ```php
 * $guard = new Guard(Store::connect('mysql://app@db/app'), new JobSpec('send_receipt', 'keyed'));
 * $outcome = $guard->run($order->id, ['order' => $order->id], function (EffectCtx $ctx) use ($order) {
 *     $id = $this->mailer->send($order, idempotencyKey: $ctx->idempotencyKey);
 *     return new Sent($id, ['id' => $id]);
 * });
 * ```
 *
 * An effect returns a Sent (or any value: done, no reference), or throws
 * NotSent, OutcomeUnknown or PermanentFailure; any other exception counts
 * as an unknown outcome (it may have happened). A local effect (`runLocal`)
 * runs on the caller's connection, in the caller's transaction, with the
 * claim and the completion.
 *
 * The shell has no heartbeat thread (PHP runs one job at a time): before the
 * effect, the machine's `cancel_requested` step reads the row (get.sql); a
 * claim found gone or moved on there answers "cancel requested", so nothing
 * is sent and the write that follows finds the claim lost. The job timeout
 * must be shorter than the lease (JobSpec::checkTiming), so a claim never
 * needs renewing.
 */
final class Guard
{
    /** @var callable(string): (bool|string)|null */
    private $faults = null;

    /** @var callable(string, \Throwable): void */
    private $log;

    /** @var callable(int): void */
    private $sleep;

    public readonly string $owner;

    public function __construct(public readonly Store $store, public readonly JobSpec $spec, ?string $owner = null)
    {
        $this->owner = $owner ?? Owner::name();
        $this->log = static function (string $what, \Throwable $e): void {
            error_log("onceonly: $what: " . $e->getMessage());
        };
        $this->sleep = static fn (int $ms) => usleep($ms * 1000);
    }

    /**
     * A hook called at the named fault points (after_claim, after_effect):
     * return true or "crash" to stop there as a dead worker would (tests,
     * the replay). It may also kill the process for real.
     */
    public function withFaults(callable $faults): self
    {
        $this->faults = $faults;
        return $this;
    }

    /** How the guard waits between tries under one claim, in ms (tests; default usleep). */
    public function withSleep(callable $sleep): self
    {
        $this->sleep = $sleep;
        return $this;
    }

    /** Where a failed audit append is reported (default: error_log). */
    public function withLog(callable $log): self
    {
        $this->log = $log;
        return $this;
    }

    /**
     * One delivery of a keyed, lookup or opaque job.
     *
     * @param callable(EffectCtx): mixed $effect
     * @param callable(EffectCtx): (Sent|null)|null $lookup by idempotency key: a Sent when found, null when surely not
     * @param callable(string, EffectCtx): (bool|string)|null $withdraw true when gone; false or a reason when it may still be there
     */
    public function run(string $opKey, mixed $payload, callable $effect, ?callable $lookup = null, ?callable $withdraw = null): Outcome
    {
        if ($this->spec->effect === 'local') {
            throw new \Onceonly\Exception\InvalidInput('a local effect runs with runLocal(), inside your transaction');
        }
        $p = $this->payload($payload);
        return $this->interpret($opKey, $p, ['entry' => 'run', 'fingerprint' => $p->fingerprint], $effect, $lookup, $withdraw, null);
    }

    /**
     * A local effect: claim, effect and completion on $conn, inside the
     * transaction the caller opened (they commit or roll back together).
     * An effect that throws rolls back (LocalEffectFailed, its exception as
     * the previous one); so does a lost claim (LostClaim).
     *
     * @param callable(EffectCtx): mixed $effect its writes go through $ctx->conn
     */
    public function runLocal(\PDO $conn, string $opKey, mixed $payload, callable $effect): Outcome
    {
        if ($this->spec->effect !== 'local') {
            throw new \Onceonly\Exception\InvalidInput("runLocal() is for local effects; this job's effect is {$this->spec->effect}");
        }
        if (!$conn->inTransaction()) {
            throw new \Onceonly\Exception\InvalidInput('runLocal() needs the caller\'s transaction open on $conn (DB::transaction)');
        }
        $p = $this->payload($payload);
        return $this->interpret($opKey, $p, ['entry' => 'local', 'fingerprint' => $p->fingerprint], $effect, null, null, $conn);
    }

    private function payload(mixed $payload): Payload
    {
        return $payload instanceof Payload ? $payload : Payload::of($payload);
    }

    /** @param array<string, mixed> $entry */
    private function interpret(string $key, Payload $payload, array $entry, callable $effect, ?callable $lookup, ?callable $withdraw, ?\PDO $conn): Outcome
    {
        $job = $this->spec->jobType;
        Keys::validateOpKey($key);
        $decide = new Decide($this->spec->machineJob(), $entry);
        $deadline = microtime(true) + $this->spec->timeoutMs / 1000;
        $claim = null;
        $raised = null;
        $answer = null;
        while (true) {
            $step = $decide->next($answer);
            $answer = null;
            switch ($step['do']) {
                case 'claim':
                    $c = $this->store->claim($job, $key, $this->owner, $payload, $this->spec->leaseMs, $conn);
                    if ($c instanceof Claim) {
                        $claim = $c;
                        $deadline = microtime(true) + $this->spec->timeoutMs / 1000;
                        $answer = ['claimed' => ['token' => $c->token, 'attempts' => $c->attempts]];
                    } else {
                        $answer = ['existing' => self::row($c)];
                    }
                    break;
                case 'take_over':
                    $to = Protocol::TAKE_OVER_TO[$step['settle']];
                    $c = $this->store->takeOver($job, $key, $step['stale_token'], $to, $this->owner, $this->spec->leaseMs, $step['reason']);
                    if ($c !== null) {
                        $claim = $c;
                        $deadline = microtime(true) + $this->spec->timeoutMs / 1000;
                    }
                    $answer = $c === null ? null : ['token' => $c->token, 'attempts' => $c->attempts];
                    break;
                case 'read':
                    $s = $this->store->get($job, $key, $conn);
                    $answer = $s === null ? null : self::row($s);
                    break;
                case 'move':
                    $answer = $this->store->move(Protocol::move(
                        $step['move'], $job, $key, $step['token'],
                        $step['external_ref'], $step['result'], $step['error'], $step['retry_after_ms'],
                    ), $conn);
                    break;
                case 'audit':
                    try {
                        $this->store->audit($job, $key, $step['event'], $this->owner, $step['token'], $step['from'], $step['to'], $step['detail'], $step['attempt'], $step['retry_after_ms']);
                    } catch (\Throwable $e) {
                        ($this->log)("audit append {$step['event']} for $job:$key failed", $e);
                    }
                    break;
                case 'fault':
                    $f = $this->faults === null ? false : ($this->faults)($step['point']);
                    $answer = ($f === true || $f === 'crash') ? 'crash' : 'continue';
                    break;
                case 'cancel_requested':
                    if ($conn !== null) {
                        $answer = false; // a local claim lives inside one transaction
                        break;
                    }
                    // A read, not a write: the claim is younger than its lease and
                    // the job timeout shorter than the lease, so nothing to renew.
                    $s = $this->store->get($job, $key);
                    $ours = $s !== null && $s->record->state === State::Claimed && $s->record->token === $claim->token;
                    $answer = $ours ? $s->record->cancelRequested : true;
                    break;
                case 'perform':
                    $ctx = new EffectCtx($job, $key, Keys::idempotencyKey($job, $key), $claim->token, $claim->attempts, $step['try'], $payload->value(), $deadline, $conn);
                    [$answer, $raised] = $this->perform($effect, $ctx, $conn !== null);
                    break;
                case 'lookup':
                    $ctx = new EffectCtx($job, $key, Keys::idempotencyKey($job, $key), $claim->token, $claim->attempts, 0, $payload->value(), $deadline);
                    $answer = $this->lookup($lookup, $ctx);
                    break;
                case 'sleep':
                    $left = $deadline - microtime(true);
                    if ($left * 1000 <= $step['ms']) {
                        $answer = 'timed_out';
                        break;
                    }
                    ($this->sleep)($step['ms']);
                    $answer = 'slept';
                    break;
                case 'withdraw':
                    $ctx = new EffectCtx($job, $key, Keys::idempotencyKey($job, $key), $claim->token, $claim->attempts, 0, $payload->value(), $deadline);
                    $answer = $this->withdraw($withdraw, $step['external_ref'], $ctx);
                    break;
                case 'finish':
                    return Outcome::of($step['outcome']);
                case 'error':
                    throw $this->failure($step['error'], $job, $key, $raised);
                default:
                    throw new \LogicException("the machine asked for {$step['do']}, which this guard does not know");
            }
        }
    }

    /**
     * Calls the effect: the machine's answer and the exception it threw.
     *
     * @return array{mixed, ?\Throwable}
     */
    private function perform(callable $effect, EffectCtx $ctx, bool $local): array
    {
        try {
            $value = $effect($ctx);
        } catch (NotSent $e) {
            return [['not_sent' => $e->getMessage()], $e];
        } catch (OutcomeUnknown $e) {
            return [['unknown' => $e->getMessage()], $e];
        } catch (PermanentFailure $e) {
            return [['failed' => $e->getMessage()], $e];
        } catch (\Throwable $e) {
            return [['raised' => get_class($e) . ': ' . $e->getMessage()], $e];
        }
        if ($local && $ctx->remaining() <= 0) {
            return ['timed_out', null];
        }
        $sent = $value instanceof Sent ? $value : new Sent(null, $value);
        try {
            Payload::of($sent->result);
            return [['done' => ['external_ref' => $sent->externalRef, 'result' => $sent->result]], null];
        } catch (\Onceonly\Exception\InvalidPayload $e) {
            $why = "the effect's result was not stored: " . $e->getMessage();
            return [['done' => ['external_ref' => $sent->externalRef, 'result' => null, 'unstored' => $why]], null];
        }
    }

    private function lookup(?callable $lookup, EffectCtx $ctx): mixed
    {
        if ($lookup === null) {
            return ['unavailable' => 'this effect has no lookup'];
        }
        try {
            $found = $lookup($ctx);
        } catch (\Throwable $e) {
            return ['unavailable' => get_class($e) . ': ' . $e->getMessage()];
        }
        if ($found === null || $found === false) {
            return 'not_found';
        }
        $sent = $found instanceof Sent ? $found : new Sent(null, $found);
        if (Answer::broken($sent->externalRef, null) !== null) {
            return ['unavailable' => 'the lookup answered a reference that breaks the answer rules: ' . Answer::broken($sent->externalRef, null)];
        }
        return ['found' => ['external_ref' => $sent->externalRef, 'result' => $sent->result]];
    }

    private function withdraw(?callable $withdraw, string $ref, EffectCtx $ctx): mixed
    {
        if ($withdraw === null) {
            return ['not_withdrawn' => 'this effect cannot be withdrawn'];
        }
        try {
            $w = $withdraw($ref, $ctx);
        } catch (\Throwable $e) {
            return ['not_withdrawn' => get_class($e) . ': ' . $e->getMessage()];
        }
        if ($w === true) {
            return 'withdrawn';
        }
        return ['not_withdrawn' => is_string($w) ? $w : 'the destination did not confirm the withdraw'];
    }

    /** @param array<string, mixed> $error */
    private function failure(array $error, string $job, string $key, ?\Throwable $raised): \Throwable
    {
        $kind = (string) array_key_first($error);
        $f = (array) $error[$kind];
        return match ($kind) {
            'lost_claim' => new LostClaim($job, $key, $f['token'], $f['row']),
            'payload_mismatch' => new PayloadMismatch($job, $key, $f['stored'], $f['offered']),
            'not_found' => new NotFound($job, $key),
            'injected_crash' => new InjectedCrash($f['point']),
            'local_effect_failed' => new LocalEffectFailed("the local effect of $job:$key failed: {$f['why']}; its transaction rolls back", 0, $raised),
            'timeout' => new EffectTimeout("the local effect of $job:$key ran past the job timeout (" . Decide::humanDuration($f['timeout_ms']) . '); its transaction rolls back'),
            default => new \LogicException("the machine ended in $kind, which this guard does not know"),
        };
    }

    /** @return array<string, mixed> a snapshot in the machine's ROW form */
    public static function row(Snapshot $s): array
    {
        $r = $s->record;
        return [
            'state' => $r->state->value,
            'token' => $r->token,
            'attempts' => $r->attempts,
            'owner' => $r->owner,
            'fingerprint' => $r->fingerprint,
            'claimed_at_ms' => $r->claimedAt,
            'lease_until_ms' => $r->leaseUntil,
            'due_at_ms' => $r->dueAt,
            'external_ref' => $r->externalRef,
            'result' => $r->result,
            'error' => $r->error,
            'cancel_requested' => $r->cancelRequested,
            'now_ms' => $s->now,
        ];
    }
}
