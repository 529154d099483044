<?php

declare(strict_types=1);

namespace Onceonly\Tests\Unit;

use Onceonly\Claim;
use Onceonly\EffectCtx;
use Onceonly\Exception\EffectTimeout;
use Onceonly\Exception\InjectedCrash;
use Onceonly\Exception\LocalEffectFailed;
use Onceonly\Exception\LostClaim;
use Onceonly\Exception\NotFound;
use Onceonly\Exception\NotSent;
use Onceonly\Exception\OutcomeUnknown;
use Onceonly\Exception\PayloadMismatch;
use Onceonly\Exception\PermanentFailure;
use Onceonly\Guard;
use Onceonly\JobSpec;
use Onceonly\Payload;
use Onceonly\Protocol;
use Onceonly\Record;
use Onceonly\Sent;
use Onceonly\Snapshot;
use Onceonly\State;
use Onceonly\Store\OpMove;
use Onceonly\Store\Store;
use Onceonly\Tests\Support\Corpus;
use PHPUnit\Framework\TestCase;

/**
 * The cases of protocol/decisions.json through the real Guard (the shell),
 * with a store, an effect, a lookup, a withdraw and a fault hook that
 * answer from the transcript and check that what the shell asked of them is
 * the recorded step. Run: the cases a PHP shell can meet, every `run` and
 * `local` case whose answers a PHP effect can give (no timed-out,
 * lease-unrenewed, claim-lost or interrupted answers: PHP has no heartbeat
 * thread and Laravel kills a job at its timeout; no raised or unavailable
 * answers, whose words the shell makes from an exception).
 */
final class DecisionsThroughTheGuardTest extends TestCase
{
    private const NOT_FROM_PHP = ['timed_out', 'lease_unrenewed', 'claim_lost', 'interrupted', 'raised', 'unavailable'];

    public function testTheCasesAPhpShellMeets(): void
    {
        $file = Corpus::load('protocol/decisions.json');
        $asJson = json_decode((string) file_get_contents(Corpus::root() . '/protocol/decisions.json'), false);
        $d = $file['delivery'];
        $ran = 0;
        foreach ($file['cases'] as $i => $case) {
            if (!in_array($case['entry']['entry'], ['run', 'local'], true) || !self::answerable($case)) {
                continue;
            }
            $script = new Transcript($this, $case, $asJson->cases[$i]);
            $job = $case['job'];
            $spec = new JobSpec($d['job_type'], $job['effect'], $job['on_stale'], $job['max_retries'], $job['lease_ms'], $job['timeout_ms']);
            $guard = (new Guard(new TranscriptStore($script), $spec, $d['owner']))
                ->withFaults(fn (string $point) => $script->next('fault', ['point' => $point]) === 'crash')
                ->withLog(static fn () => null)
                ->withSleep(fn (int $ms) => $script->next('sleep', ['ms' => $ms]));
            $payload = self::payloadWithFingerprint($case['entry']['fingerprint']);
            try {
                if ($case['entry']['entry'] === 'local') {
                    $pdo = new \PDO('sqlite::memory:');
                    $pdo->beginTransaction();
                    $outcome = $guard->runLocal($pdo, $d['op_key'], $payload, fn (EffectCtx $ctx) => $script->perform($ctx));
                } else {
                    $outcome = $guard->run(
                        $d['op_key'],
                        $payload,
                        fn (EffectCtx $ctx) => $script->perform($ctx),
                        fn (EffectCtx $ctx) => $script->lookup(),
                        fn (string $ref) => $script->withdraw($ref),
                    );
                }
                $script->ends(['finish' => [$outcome->kind => $outcome->fields]]);
            } catch (\Onceonly\Exception\OnceonlyException $e) {
                $script->ends(['error' => self::errorOf($e)]);
            }
            $ran++;
        }
        $this->assertGreaterThan(400, $ran, 'most run and local cases');
        Corpus::say("decisions through the guard shell: $ran of " . count($file['cases']) . ' cases (the rest need answers a PHP shell never gives)');
    }

    private static function answerable(array $case): bool
    {
        foreach ($case['steps'] as $s) {
            $a = $s['answer'] ?? null;
            $tag = is_array($a) && count($a) === 1 ? array_key_first($a) : $a;
            if (is_string($tag) && in_array($tag, self::NOT_FROM_PHP, true)) {
                return false;
            }
        }
        return true;
    }

    private static function payloadWithFingerprint(string $fingerprint): Payload
    {
        $p = (new \ReflectionClass(Payload::class))->newInstanceWithoutConstructor();
        (function (string $fp) {
            $this->json = null;
            $this->fingerprint = $fp;
        })->call($p, $fingerprint);
        return $p;
    }

    /** @return array<string, mixed> the machine's error form of the shell's exception */
    private static function errorOf(\Throwable $e): array
    {
        return match (true) {
            $e instanceof LostClaim => ['lost_claim' => ['token' => $e->token, 'row' => $e->row]],
            $e instanceof PayloadMismatch => ['payload_mismatch' => ['stored' => $e->stored, 'offered' => $e->offered]],
            $e instanceof NotFound => ['not_found' => new \stdClass()],
            $e instanceof InjectedCrash => ['injected_crash' => ['point' => $e->point]],
            $e instanceof LocalEffectFailed => ['local_effect_failed' => ['why' => $e->getPrevious()?->getMessage()]],
            $e instanceof EffectTimeout => ['timeout' => ['timeout_ms' => 10000]],
            default => throw $e,
        };
    }
}

/** One case's steps, consumed in order by the fakes; each checks what it was asked against the recorded step. */
final class Transcript
{
    private int $at = 0;

    public function __construct(private readonly TestCase $t, private readonly array $case, private readonly object $json)
    {
    }

    /** The kind of the next recorded step. */
    public function peek(): ?string
    {
        return $this->case['steps'][$this->at]['step']['do'] ?? null;
    }

    /** The recorded answer to a step of kind $do, after checking $fields against the recorded step. */
    public function next(string $do, array $fields): mixed
    {
        $recorded = $this->case['steps'][$this->at] ?? null;
        $where = "{$this->case['name']}: step {$this->at}";
        $this->t->assertNotNull($recorded, "$where: the shell asked for $do after the end");
        $this->t->assertSame($recorded['step']['do'], $do, "$where: the shell asked for $do");
        foreach ($fields as $k => $v) {
            $want = Payload::of($this->json->steps[$this->at]->step->{$k} ?? null)->json;
            $this->t->assertSame($want, Payload::of($v)->json, "$where: $do.$k");
        }
        $this->at++;
        return $recorded['answer'] ?? null;
    }

    public function perform(EffectCtx $ctx): mixed
    {
        $a = $this->next('perform', ['try' => $ctx->try]);
        [$tag, $v] = is_array($a) ? [array_key_first($a), reset($a)] : [$a, null];
        return match ($tag) {
            'done' => new Sent($v['external_ref'] ?? null, $this->json->steps[$this->at - 1]->answer->done->result ?? null),
            'not_sent' => throw new NotSent($v),
            'unknown' => throw new OutcomeUnknown($v),
            'failed' => throw new PermanentFailure($v),
        };
    }

    public function lookup(): ?Sent
    {
        $a = $this->next('lookup', []);
        if ($a === 'not_found') {
            return null;
        }
        return new Sent($a['found']['external_ref'] ?? null, $this->json->steps[$this->at - 1]->answer->found->result ?? null);
    }

    public function withdraw(string $ref): bool|string
    {
        $a = $this->next('withdraw', ['external_ref' => $ref]);
        return $a === 'withdrawn' ? true : $a['not_withdrawn'];
    }

    /** The shell ended as the case ends. */
    public function ends(array $end): void
    {
        $recorded = $this->case['steps'][$this->at] ?? null;
        $where = "{$this->case['name']}: the end (step {$this->at})";
        $this->t->assertNotNull($recorded, $where);
        $kind = array_key_first($end);
        $this->t->assertSame($recorded['step']['do'], $kind, $where);
        $field = $kind === 'finish' ? 'outcome' : 'error';
        $want = $this->json->steps[$this->at]->step->{$field};
        if ($kind === 'error' && isset($want->local_effect_failed)) {
            $want->local_effect_failed->why = $end['error']['local_effect_failed']['why']; // the exception's own words
        }
        $this->t->assertSame(Payload::of($want)->json, Payload::of($end[$kind])->json, $where);
        $this->t->assertCount($this->at + 1, $this->case['steps'], "$where: steps left over");
    }

    public function row(?array $row): ?Snapshot
    {
        if ($row === null) {
            return null;
        }
        $r = $row + ['job_type' => 'mail', 'op_key' => 'order-1', 'payload' => null, 'created_at' => 0, 'updated_at' => 0, 'completed_at' => null];
        return new Snapshot(Record::fromRow([
            'job_type' => $r['job_type'], 'op_key' => $r['op_key'], 'state' => $r['state'], 'token' => $r['token'],
            'owner' => $r['owner'], 'attempts' => $r['attempts'], 'fingerprint' => $r['fingerprint'], 'payload' => null,
            'external_ref' => $r['external_ref'], 'result' => $r['result'], 'cancel_requested' => $r['cancel_requested'],
            'error' => $r['error'], 'due_at' => $r['due_at_ms'], 'claimed_at' => $r['claimed_at_ms'],
            'lease_until' => $r['lease_until_ms'], 'created_at' => 0, 'updated_at' => 0, 'completed_at' => null,
        ]), $r['now_ms']);
    }
}

/** A store whose every statement is the next step of a transcript. */
final class TranscriptStore extends Store
{
    public function __construct(private readonly Transcript $script)
    {
        parent::__construct('fake://transcript');
    }

    public function dialect(): string
    {
        return 'fake';
    }

    public function migrate(): void
    {
    }

    protected function open(): \PDO
    {
        throw new \LogicException('no connection');
    }

    public function claim(string $job, string $key, string $owner, Payload $payload, int $leaseMs, ?\PDO $in = null): Claim|Snapshot
    {
        $a = $this->script->next('claim', []);
        $this->token = $a['claimed']['token'] ?? null;
        return isset($a['claimed']) ? new Claim($a['claimed']['token'], $a['claimed']['attempts'], 0, $leaseMs) : $this->script->row($a['existing']);
    }

    public function takeOver(string $job, string $key, int $staleToken, State $to, string $owner, int $leaseMs, string $reason): ?Claim
    {
        $settle = array_search($to, Protocol::TAKE_OVER_TO, true);
        $a = $this->script->next('take_over', ['settle' => $settle, 'stale_token' => $staleToken, 'reason' => $reason]);
        $this->token = $a['token'] ?? $this->token;
        return $a === null ? null : new Claim($a['token'], $a['attempts'], 0, $leaseMs);
    }

    /** The token of the claim handed out last. */
    public ?int $token = null;

    public function get(string $job, string $key, ?\PDO $in = null): ?Snapshot
    {
        if ($this->script->peek() === 'cancel_requested') {
            // The shell reads the row to answer cancel_requested: ours, with the recorded flag.
            $flag = $this->script->next('cancel_requested', []);
            return $this->script->row(['state' => 'claimed', 'token' => $this->token, 'attempts' => 1, 'owner' => 'w-me',
                'fingerprint' => 'fp-1', 'claimed_at_ms' => 0, 'lease_until_ms' => 30_000, 'due_at_ms' => null,
                'external_ref' => null, 'result' => null, 'error' => null, 'cancel_requested' => $flag, 'now_ms' => 1]);
        }
        return $this->script->row($this->script->next('read', []));
    }

    public function move(OpMove $m, ?\PDO $in = null): bool
    {
        $name = null;
        foreach (Protocol::MOVES as $n => [$from, $to, $fence]) {
            if ($from === $m->from && $to === $m->to && $fence === $m->unlessCancelRequested && !str_starts_with($n, 'resolve_')) {
                $name = $n;
                break;
            }
        }
        // complete and complete_withdraw_failed differ only by the fence, as do the rest.
        return $this->script->next('move', [
            'move' => $name, 'token' => $m->token, 'external_ref' => $m->externalRef, 'result' => $m->result,
            'error' => $m->error, 'retry_after_ms' => $m->retryAfterMs,
        ]);
    }


    public function audit(string $job, string $key, string $event, string $actor, int $token, ?string $from, ?string $to, ?string $detail, ?int $attempt = null, ?int $retryAfterMs = null): void
    {
        $this->script->next('audit', [
            'event' => $event, 'token' => $token, 'from' => $from, 'to' => $to, 'detail' => $detail,
            'attempt' => $attempt, 'retry_after_ms' => $retryAfterMs,
        ]);
    }
}
