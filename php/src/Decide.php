<?php

declare(strict_types=1);

namespace Onceonly;

/**
 * The guard's decisions: a port of the pure step machine of the Rust core
 * (crates/onceonly/src/protocol/decide.rs), run against every case of
 * protocol/decisions.json by tests/Unit/DecisionsTest.php.
 *
 * One Decide is one delivery of one job. next() returns the next step for
 * the interpreter (the Guard) to take, and is given the answer to the step
 * it returned last, until a step ends the delivery (`finish` with an
 * outcome, or `error`). It does no I/O, reads no clock and never waits;
 * every message it writes into the record, the audit trail and the outcome
 * is worded here (as in Rust), so the Guard words nothing itself.
 *
 * Steps and answers are PHP values in the JSON form of decisions.json
 * (docs/protocol.md): a step is an array with `do`; an answer is `true`,
 * `null`, `"continue"`, `['claimed' => ['token' => 1, 'attempts' => 1]]`,
 * a row array, .... A JSON value the effect returned (`result`) is kept as
 * given (arrays, or stdClass for objects) and written canonically.
 *
 * The machine is a generator: each `yield` is a step and receives its answer.
 */
final class Decide
{
    /** How a not-sent outcome from an unanswered lookup begins. */
    public const LOOKUP_UNAVAILABLE = 'lookup unavailable';

    /** The first wait between tries under one claim (doubling after each). */
    public const FIRST_SLEEP_MS = 20;

    private \Generator $run;
    private bool $started = false;
    private ?array $end = null;

    /**
     * @param array{effect: string, on_stale: ?string, max_retries: int, lease_ms: int, timeout_ms: int} $job
     * @param array<string, mixed> $entry `['entry' => 'run', 'fingerprint' => ...]`, `run_claimed` with `claim`,
     *        `release_unstarted` with `claim` and `reason`, `local` with `fingerprint`
     */
    public function __construct(private readonly array $job, private readonly array $entry)
    {
        $this->run = $this->main();
    }

    /**
     * The next step, given the answer to the last one (null on the first
     * call, and to an audit append). After an end, returns the end again.
     *
     * @return array<string, mixed>
     */
    public function next(mixed $answer = null): array
    {
        if ($this->end !== null) {
            return $this->end;
        }
        if (!$this->started) {
            $this->started = true;
            $this->run->current();
        } else {
            $this->run->send($answer);
        }
        if ($this->run->valid()) {
            return $this->run->current();
        }
        return $this->end = $this->run->getReturn();
    }

    /** 500ms after the first claim, doubling per claim, at most a minute. */
    public static function retryBackoffMs(int $attempt): int
    {
        $doublings = max(0, min(7, $attempt - 1));
        return min(500 << $doublings, 60_000);
    }

    /** A duration as Rust's humantime writes it (`10s`, `1m 30s`, `1s 500ms`). */
    public static function humanDuration(int $ms): string
    {
        if ($ms === 0) {
            return '0s';
        }
        $parts = [];
        $units = [['day', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1_000], ['ms', 1]];
        foreach ($units as [$name, $size]) {
            $n = intdiv($ms, $size);
            $ms -= $n * $size;
            if ($n > 0) {
                $parts[] = $name === 'day' ? $n . ($n === 1 ? 'day' : 'days') : "$n$name";
            }
        }
        return implode(' ', $parts);
    }

    // -- the machine -------------------------------------------------------------

    private function main(): \Generator
    {
        try {
            $e = $this->entry;
            $outcome = match ($e['entry']) {
                'run' => yield from $this->run($e['fingerprint']),
                'run_claimed' => yield from $this->act($e['claim'], false),
                'release_unstarted' => yield from $this->releaseOrCancel($e['claim'], $e['reason'], null, false),
                'local' => yield from $this->local($e['fingerprint']),
            };
            return ['do' => 'finish', 'outcome' => $outcome];
        } catch (Ended $end) {
            return $end->step;
        }
    }

    private static function end(string $kind, array|\stdClass $fields): never
    {
        throw new Ended(['do' => 'error', 'error' => [$kind => $fields]]);
    }

    private function fault(string $point): \Generator
    {
        $a = yield ['do' => 'fault', 'point' => $point];
        if ($a === 'crash') {
            self::end('injected_crash', ['point' => $point]);
        }
        self::expect($a === 'continue', 'fault', $a);
    }

    private function move(string $move, int $token, ?string $externalRef, ?string $result, ?string $error, ?int $retryAfterMs): \Generator
    {
        $a = yield [
            'do' => 'move', 'move' => $move, 'token' => $token, 'external_ref' => $externalRef,
            'result' => $result, 'error' => $error, 'retry_after_ms' => $retryAfterMs,
        ];
        self::expect(is_bool($a), 'move', $a);
        return $a;
    }

    private function audit(string $event, int $token, string $from, string $to, string $detail, ?int $attempt = null, ?int $retryAfterMs = null): \Generator
    {
        yield [
            'do' => 'audit', 'event' => $event, 'token' => $token, 'from' => $from, 'to' => $to,
            'detail' => $detail, 'attempt' => $attempt, 'retry_after_ms' => $retryAfterMs,
        ];
    }

    private function read(): \Generator
    {
        $a = yield ['do' => 'read'];
        self::expect($a === null || is_array($a), 'read', $a);
        return $a;
    }

    private function cancelRequested(): \Generator
    {
        $a = yield ['do' => 'cancel_requested'];
        self::expect(is_bool($a), 'cancel_requested', $a);
        return $a;
    }

    /** A delivery: claims, or decides from the row found; takes a stale claim over by the policy; then acts. */
    private function run(string $fingerprint): \Generator
    {
        $a = yield ['do' => 'claim'];
        if (isset($a['claimed'])) {
            return yield from $this->act($a['claimed'], false);
        }
        self::expect(isset($a['existing']), 'claim', $a);
        $row = $a['existing'];
        $seen = $this->existing($row, $fingerprint);
        if ($seen !== null) {
            return $seen;
        }
        $claim = yield from $this->takeOver($row);
        if ($claim === null) {
            return yield from $this->settledAfterRace($fingerprint);
        }
        return yield from $this->act($claim, true);
    }

    /** What an existing row means for a delivery: an outcome, or null for a stale claim. */
    private function existing(array $row, string $fingerprint): ?array
    {
        if ($row['fingerprint'] !== $fingerprint) {
            self::end('payload_mismatch', ['stored' => $row['fingerprint'], 'offered' => $fingerprint]);
        }
        switch ($row['state']) {
            case 'completed':
                return ['done' => ['result' => self::resultValue($row['result']), 'external_ref' => $row['external_ref'], 'repeat' => true]];
            case 'failed':
                return ['failed' => ['error' => $row['error']]];
            case 'cancelled':
                return ['cancelled' => ['withdrawn_ref' => null]];
            case 'held':
                return ['held' => ['reason' => $row['error']]];
            case 'queued':
                return ['not_due' => ['due_at_ms' => $row['due_at_ms']]];
        }
        if (self::leaseExpired($row)) {
            return null;
        }
        $claimedAt = $row['claimed_at_ms'] ?? $row['now_ms'];
        return ['in_progress' => [
            'age_ms' => self::ageMs($row),
            'lease_ms' => self::since($row['lease_until_ms'] ?? $row['now_ms'], $claimedAt),
            'owner' => $row['owner'],
        ]];
    }

    /** The stale-claim policy: redo, hold or fail, after $attempts claims. */
    public static function policy(string $effect, ?string $onStale, int $attempts): string
    {
        if ($effect !== 'opaque') {
            return 'redo';
        }
        return match ($onStale) {
            'hold' => 'hold',
            'at_most_once' => 'fail',
            default => $attempts >= 2 ? 'hold' : 'redo',
        };
    }

    /** Takes over a stale claim as the policy says: the claim to act under, or null. */
    private function takeOver(array $stale): \Generator
    {
        $owner = $stale['owner'] ?? '?';
        $settle = self::policy($this->job['effect'], $this->job['on_stale'], (int) $stale['attempts']);
        $reason = match (true) {
            $settle === 'hold' && $this->job['on_stale'] === 'at_least_once' => 'a redo under at-least-once also went past its lease; held to keep to one extra',
            $settle === 'hold' => "claim by $owner went past its lease; the effect may or may not have happened",
            $settle === 'fail' => 'claim went past its lease; given up under at-most-once (the effect may be missing)',
            default => "took over a claim of $owner past its lease",
        };
        $taken = yield ['do' => 'take_over', 'settle' => $settle, 'stale_token' => $stale['token'], 'reason' => $reason];
        self::expect($taken === null || isset($taken['token']), 'take_over', $taken);
        if ($taken !== null) {
            $to = Protocol::TAKE_OVER_TO[$settle]->value;
            yield from $this->audit('take_over', $taken['token'], 'claimed', $to, "stale token {$stale['token']}: $reason");
        }
        return $settle === 'redo' ? $taken : null;
    }

    /** After a lost take-over race or a settled take-over: the row as it stands. */
    private function settledAfterRace(string $fingerprint): \Generator
    {
        $row = yield from $this->read();
        if ($row === null) {
            self::end('not_found', new \stdClass());
        }
        return $this->existing($row, $fingerprint) ?? $this->inProgressStale($row);
    }

    private function inProgressStale(array $row): array
    {
        return ['in_progress' => ['age_ms' => self::ageMs($row), 'lease_ms' => $this->job['lease_ms'], 'owner' => $row['owner']]];
    }

    /** Acts under a claim this worker holds, then records the outcome. */
    private function act(array $claim, bool $afterStale): \Generator
    {
        yield from $this->fault('after_claim');
        $report = yield from $this->attempts($claim, $afterStale);
        return yield from $this->record($claim, self::withinAnswerRules($report));
    }

    /**
     * The effect, tried again under the claim where the kind allows it.
     *
     * @return \Generator<mixed, mixed, mixed, array{string, mixed}> a report: [done, done], [not_sent, why], [unknown, why], [failed, why]
     */
    private function attempts(array $claim, bool $afterStale): \Generator
    {
        $kind = $this->job['effect'];
        $lookFirst = $kind === 'lookup' && ($afterStale || $claim['attempts'] > 1);
        $retriesLeft = (int) $this->job['max_retries'];
        $sleepMs = self::FIRST_SLEEP_MS;
        $try = 1;
        while (true) {
            if ($lookFirst) {
                $a = yield ['do' => 'lookup'];
                [$tag, $v] = self::tagged($a);
                switch ($tag) {
                    case 'found':
                        return ['done', ['external_ref' => $v['external_ref'] ?? null, 'result' => $v['result'] ?? null]];
                    case 'not_found':
                        break;
                    case 'unavailable':
                        return ['not_sent', self::LOOKUP_UNAVAILABLE . ": $v"];
                    case 'interrupted':
                        return ['not_sent', self::LOOKUP_UNAVAILABLE . ': ' . self::stopped($v)];
                    case 'timed_out':
                        return ['unknown', $this->timedOut()];
                    case 'lease_unrenewed':
                        return ['unknown', self::unrenewed($v)];
                    case 'claim_lost':
                        return yield from $this->lostClaim($claim['token']);
                    default:
                        self::expect(false, 'lookup', $a);
                }
            }
            if (yield from $this->cancelRequested()) {
                return ['failed', 'cancel requested before the effect'];
            }
            $a = yield ['do' => 'perform', 'try' => $try];
            [$tag, $v] = self::tagged($a);
            switch ($tag) {
                case 'done':
                    $report = ['done', $v];
                    break;
                case 'not_sent':
                    $report = ['not_sent', $v];
                    break;
                case 'unknown':
                case 'raised':
                    $report = ['unknown', $v];
                    break;
                case 'failed':
                    $report = ['failed', $v];
                    break;
                case 'timed_out':
                    return ['unknown', $this->timedOut()];
                case 'lease_unrenewed':
                    return ['unknown', self::unrenewed($v)];
                case 'interrupted':
                    return ['unknown', 'the effect ' . self::stopped($v)];
                case 'claim_lost':
                    return yield from $this->lostClaim($claim['token']);
                default:
                    self::expect(false, 'perform', $a);
            }
            $retry = match ($report[0]) {
                'not_sent' => true,
                'unknown' => $kind === 'keyed' || $kind === 'lookup',
                default => false,
            };
            if (!$retry || $retriesLeft === 0) {
                if ($report[0] === 'done') {
                    yield from $this->fault('after_effect');
                }
                return $report;
            }
            $retriesLeft--;
            $lookFirst = $kind === 'lookup';
            $a = yield ['do' => 'sleep', 'ms' => $sleepMs];
            [$tag, $v] = self::tagged($a);
            switch ($tag) {
                case 'slept':
                    break;
                case 'timed_out':
                    return $report; // nothing was sent during the sleep: the last report stands
                case 'lease_unrenewed':
                    return ['unknown', self::unrenewed($v)];
                case 'claim_lost':
                    return yield from $this->lostClaim($claim['token']);
                default:
                    self::expect(false, 'sleep', $a);
            }
            $sleepMs *= 2;
            $try++;
        }
    }

    private function timedOut(): string
    {
        return 'timed out after ' . self::humanDuration((int) $this->job['timeout_ms'])
            . ' (the job timeout: the whole attempt, every request in it); the effect was stopped';
    }

    /** Writes what the effect reported, under the claim's token. */
    private function record(array $claim, array $report): \Generator
    {
        [$kind, $v] = $report;
        switch ($kind) {
            case 'done':
                $text = self::text($v['result'] ?? null);
                $ref = $v['external_ref'] ?? null;
                if (yield from $this->move('complete', $claim['token'], $ref, $text, $v['unstored'] ?? null, null)) {
                    return ['done' => ['result' => $v['result'] ?? null, 'external_ref' => $ref, 'repeat' => false]];
                }
                return yield from $this->completionRefused($claim, $v, $text);
            case 'not_sent':
                $backoff = self::retryBackoffMs($claim['attempts']);
                return yield from $this->releaseOrCancel($claim, $v, $backoff, $this->lookedUp($claim, $v));
            case 'failed':
                if (yield from $this->cancelRequested()) {
                    return yield from $this->cancelUnsent($claim, $v, $this->lookedUp($claim, $v));
                }
                yield from $this->fenced($claim, 'fail', $v);
                return ['failed' => ['error' => $v]];
            default:
                return yield from $this->unknown($claim, $v);
        }
    }

    /** An unknown outcome that retries under the claim did not clear: the policy decides. */
    private function unknown(array $claim, string $reason): \Generator
    {
        $settle = self::policy($this->job['effect'], $this->job['on_stale'], $claim['attempts']);
        if ($settle !== 'redo') {
            $to = $settle === 'fail' ? 'fail' : 'hold';
            yield from $this->fenced($claim, $to, $reason);
            return $to === 'fail' ? ['failed' => ['error' => $reason]] : ['held' => ['reason' => $reason]];
        }
        $backoff = self::retryBackoffMs($claim['attempts']);
        if (yield from $this->release($claim, $reason, $backoff)) {
            return ['retry_later' => ['reason' => $reason, 'retry_after_ms' => $backoff]];
        }
        $note = "cancel requested, but the effect's outcome is unknown ($reason); check the destination";
        yield from $this->fenced($claim, 'hold', $note);
        return ['held' => ['reason' => $note]];
    }

    private function releaseOrCancel(array $claim, string $reason, ?int $backoff, bool $lookedUp): \Generator
    {
        if (yield from $this->release($claim, $reason, $backoff)) {
            return ['retry_later' => ['reason' => $reason, 'retry_after_ms' => $backoff ?? 0]];
        }
        return yield from $this->cancelUnsent($claim, "cancel requested; the effect was not sent ($reason)", $lookedUp);
    }

    private function lookedUp(array $claim, string $reason): bool
    {
        return $this->job['effect'] === 'lookup' && $claim['attempts'] > 1 && !str_starts_with($reason, self::LOOKUP_UNAVAILABLE);
    }

    private function cancelUnsent(array $claim, string $note, bool $lookedUp): \Generator
    {
        if ($claim['attempts'] <= 1 || $lookedUp) {
            yield from $this->fenced($claim, 'cancel_claimed', $note);
            return ['cancelled' => ['withdrawn_ref' => null]];
        }
        $note = "$note; an earlier claim of this operation may have acted: check the destination";
        yield from $this->fenced($claim, 'hold', $note);
        return ['held' => ['reason' => $note]];
    }

    /** Releases the claim unless a cancel is pending: true released, false a cancel is pending and the claim is ours. */
    private function release(array $claim, string $reason, ?int $backoff): \Generator
    {
        if (yield from $this->move('release', $claim['token'], null, null, $reason, $backoff)) {
            yield from $this->audit($backoff !== null ? 'retry' : 'released', $claim['token'], 'claimed', 'queued', $reason, $claim['attempts'], $backoff ?? 0);
            return true;
        }
        $row = yield from $this->read();
        if ($row === null) {
            self::end('not_found', new \stdClass());
        }
        if (self::oursWithCancel($row, $claim['token'])) {
            return false;
        }
        return yield from $this->lost($claim['token'], $row);
    }

    /** The owner's move (fail, hold or cancel_claimed), or a lost claim. */
    private function fenced(array $claim, string $move, string $reason): \Generator
    {
        if (!yield from $this->move($move, $claim['token'], null, null, $reason, null)) {
            yield from $this->lostClaim($claim['token']);
        }
        $event = match ($move) {
            'hold' => 'hold',
            'cancel_claimed' => 'cancelled',
            default => 'failed',
        };
        [$from, $to] = Protocol::MOVES[$move];
        yield from $this->audit($event, $claim['token'], $from->value, $to->value, $reason);
    }

    /** The completion changed nothing: a cancel came while the effect ran (withdraw it), or the claim is gone. */
    private function completionRefused(array $claim, array $done, string $text): \Generator
    {
        $row = yield from $this->read();
        if ($row === null) {
            self::end('not_found', new \stdClass());
        }
        if (!self::oursWithCancel($row, $claim['token'])) {
            return yield from $this->lost($claim['token'], $row);
        }
        $ref = $done['external_ref'] ?? null;
        if ($ref !== null) {
            $w = yield ['do' => 'withdraw', 'external_ref' => $ref];
            [$tag, $why] = self::tagged($w);
            self::expect($tag === 'withdrawn' || $tag === 'not_withdrawn', 'withdraw', $w);
        } else {
            [$tag, $why] = ['not_withdrawn', 'the effect returned no reference to withdraw'];
        }
        if ($tag === 'withdrawn') {
            $move = 'cancel_claimed';
            $outcome = ['cancelled' => ['withdrawn_ref' => $ref]];
            $note = 'cancel requested while the effect ran; withdrawn at the destination';
            $event = 'compensated';
        } else {
            $move = 'complete_withdraw_failed';
            $outcome = ['withdraw_failed' => ['external_ref' => $ref, 'error' => $why]];
            $note = "cancel requested while the effect ran, but the withdraw failed ($why); the item is live at the destination";
            $event = 'withdraw_failed';
        }
        if (!yield from $this->move($move, $claim['token'], $ref, $text, $note, null)) {
            return yield from $this->lostClaim($claim['token']);
        }
        [$from, $to] = Protocol::MOVES[$move];
        yield from $this->audit($event, $claim['token'], $from->value, $to->value, $note);
        return $outcome;
    }

    /** Reads the row and ends in a lost claim (or not found). */
    private function lostClaim(int $token): \Generator
    {
        $row = yield from $this->read();
        if ($row === null) {
            self::end('not_found', new \stdClass());
        }
        return yield from $this->lost($token, $row);
    }

    /** Ends in a lost claim for $token, with the row as it now stands, appended to the audit trail. */
    private function lost(int $token, array $row): \Generator
    {
        $detail = sprintf('the row is now %s with token %d (owner %s)', $row['state'], $row['token'], $row['owner'] ?? '-');
        yield from $this->audit('lost_claim', $token, 'claimed', $row['state'], $detail);
        self::end('lost_claim', ['token' => $token, 'row' => $row]);
    }

    /** Claim, effect and completion inside the caller's transaction; a refused completion is a lost claim without an audit append. */
    private function local(string $fingerprint): \Generator
    {
        $a = yield ['do' => 'claim'];
        if (isset($a['existing'])) {
            return $this->existing($a['existing'], $fingerprint) ?? $this->inProgressStale($a['existing']);
        }
        self::expect(isset($a['claimed']), 'claim', $a);
        $claim = $a['claimed'];
        yield from $this->fault('after_claim');
        $p = yield ['do' => 'perform', 'try' => 1];
        [$tag, $v] = self::tagged($p);
        switch ($tag) {
            case 'done':
                $result = $v['result'] ?? null;
                break;
            case 'timed_out':
                self::end('timeout', ['timeout_ms' => $this->job['timeout_ms']]);
            case 'claim_lost':
                self::end('local_effect_failed', ['why' => 'the claim was lost']);
            case 'raised':
            case 'not_sent':
            case 'unknown':
            case 'failed':
            case 'interrupted':
            case 'lease_unrenewed':
                self::end('local_effect_failed', ['why' => $v]);
            default:
                self::expect(false, 'perform', $p);
        }
        yield from $this->fault('after_effect');
        if (yield from $this->move('complete', $claim['token'], null, self::text($result), null, null)) {
            return ['done' => ['result' => $result, 'external_ref' => null, 'repeat' => false]];
        }
        $row = yield from $this->read();
        if ($row === null) {
            self::end('not_found', new \stdClass());
        }
        self::end('lost_claim', ['token' => $claim['token'], 'row' => $row]);
    }

    // -- small rules ---------------------------------------------------------------

    /** A done report whose reference or result breaks the answer rules is a permanent failure. */
    private static function withinAnswerRules(array $report): array
    {
        if ($report[0] !== 'done') {
            return $report;
        }
        $broken = Answer::broken($report[1]['external_ref'] ?? null, self::text($report[1]['result'] ?? null));
        return $broken === null ? $report : ['failed', $broken];
    }

    /** The stored JSON text of a result (canonical: keys sorted, as serde_json's map). */
    public static function text(mixed $result): string
    {
        return Payload::of($result)->json;
    }

    /** A stored result's text as a value (objects as stdClass); null when it is not JSON. */
    private static function resultValue(?string $text): mixed
    {
        if ($text === null) {
            return null;
        }
        try {
            return json_decode($text, false, 512, JSON_THROW_ON_ERROR | JSON_BIGINT_AS_STRING);
        } catch (\JsonException) {
            return null;
        }
    }

    private static function leaseExpired(array $row): bool
    {
        return $row['lease_until_ms'] === null || $row['lease_until_ms'] <= $row['now_ms'];
    }

    private static function ageMs(array $row): int
    {
        return self::since($row['now_ms'], $row['claimed_at_ms'] ?? $row['now_ms']);
    }

    private static function since(int $later, int $earlier): int
    {
        return max(0, $later - $earlier);
    }

    private static function oursWithCancel(array $row, int $token): bool
    {
        return $row['state'] === 'claimed' && $row['token'] === $token && $row['cancel_requested'] === true;
    }

    private static function unrenewed(string $e): string
    {
        return "the lease could not be renewed ($e); the effect was stopped before it ran out";
    }

    private static function stopped(string $why): string
    {
        return "was stopped at the time limit ($why)";
    }

    /** An answer as [tag, value]: `"slept"` is ['slept', null], `{"done": {...}}` is ['done', [...]]. */
    private static function tagged(mixed $a): array
    {
        if (is_string($a)) {
            return [$a, null];
        }
        if (is_array($a) && count($a) === 1) {
            $tag = array_key_first($a);
            return [(string) $tag, $a[$tag]];
        }
        return ['', null];
    }

    private static function expect(bool $ok, string $step, mixed $answer): void
    {
        if (!$ok) {
            throw new \LogicException(sprintf('%s does not answer %s', json_encode($answer), $step));
        }
    }
}
