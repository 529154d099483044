<?php

declare(strict_types=1);

namespace Onceonly\Tests\Unit;

use Onceonly\Answer;
use Onceonly\DbUrl;
use Onceonly\Exception\AnswerError;
use Onceonly\Exception\InvalidKey;
use Onceonly\Exception\InvalidPayload;
use Onceonly\Keys;
use Onceonly\Payload;
use Onceonly\Tests\Support\Corpus;
use PHPUnit\Framework\TestCase;

/** The shared cross-language corpus (protocol/corpus), byte for byte. */
final class CorpusTest extends TestCase
{
    public function testCanonicalJsonAndFingerprintMatchTheRustCore(): void
    {
        $corpus = Corpus::load('protocol/corpus/payloads.json');
        $this->assertGreaterThanOrEqual(40, count($corpus['cases']), 'the corpus lost its cases');
        foreach ($corpus['cases'] as $case) {
            $p = Payload::parse($case['input']);
            $this->assertSame($case['canonical'], $p->json, $case['name']);
            $this->assertSame($case['fingerprint'], $p->fingerprint, $case['name']);
        }
        Corpus::say(sprintf('payloads corpus: %d cases, %d refused', count($corpus['cases']), count($corpus['refused'])));
    }

    public function testAPhpValueReadFromTheSameTextEncodesTheSameWay(): void
    {
        $corpus = Corpus::load('protocol/corpus/payloads.json');
        $checked = 0;
        foreach ($corpus['cases'] as $case) {
            // json_decode cannot carry what PHP's int cannot (u64 above i64, -0):
            // those cases are checked through parse() above.
            $value = json_decode($case['input'], false, 512, JSON_BIGINT_AS_STRING);
            if (is_string($value) && preg_match('/^-?\d+$/', $value) || $case['input'] === '-0' || str_contains($case['input'], '{}') || str_contains($case['input'], '""')) {
                continue;
            }
            if (!str_contains(json_encode($value, JSON_PRESERVE_ZERO_FRACTION) ?: '', '"') && preg_match('/^-?\d{19,}/', $case['input'])) {
                continue;
            }
            $this->assertSame($case['canonical'], Payload::of($value)->json, $case['name']);
            $checked++;
        }
        $this->assertGreaterThan(35, $checked);
    }

    public function testArraysAndObjectsFromPhpValues(): void
    {
        $this->assertSame('{"a":1,"b":[true,null]}', Payload::of(['b' => [true, null], 'a' => 1])->json);
        $this->assertSame('{"10":6,"9":7}', Payload::of([9 => 7, 10 => 6])->json);
        $this->assertSame('[]', Payload::of([])->json);
        $this->assertSame('{}', Payload::of(new \stdClass())->json);
        $this->assertSame('{"amount":19.99}', Payload::of(['amount' => 19.99])->json);
    }

    public function testAKeyNamedTwiceIsRefusedNamingIt(): void
    {
        foreach (Corpus::load('protocol/corpus/payloads.json')['refused'] as $case) {
            $said = sprintf('duplicate key %s in the object at %s', json_encode($case['key'], JSON_UNESCAPED_UNICODE), $case['object']);
            try {
                Payload::parse($case['input']);
                $this->fail("accepted: {$case['name']}");
            } catch (InvalidPayload $e) {
                $this->assertStringContainsString($said, $e->getMessage(), $case['name']);
            }
        }
    }

    public function testNoPayloadFingerprintsTheEmptyString(): void
    {
        $none = Corpus::load('protocol/corpus/payloads.json')['none'];
        $this->assertNull(Payload::none()->json);
        $this->assertSame($none['fingerprint'], Payload::none()->fingerprint);
    }

    /** @return iterable<array{string, string}> */
    public static function badTexts(): iterable
    {
        yield ['{not json', 'not valid JSON'];
        yield ['NaN', 'NaN'];
        yield ['"\\ud800"', 'lone surrogate'];
        yield ['[1,]', 'not valid JSON'];
        yield ["\"\xff\"", 'not UTF-8'];
        yield ['1e999', 'too large'];
    }

    /** @dataProvider badTexts */
    public function testBadPayloadTextNamesTheProblem(string $bad, string $words): void
    {
        $this->expectException(InvalidPayload::class);
        $this->expectExceptionMessage($words);
        Payload::parse($bad);
    }

    public function testBadPayloadValuesNameTheProblem(): void
    {
        foreach ([[INF, 'infinity'], [['a' => NAN], 'NaN at $.a'], [['a' => fopen('php://memory', 'r')], 'resource'], ["\xff", 'not UTF-8']] as [$value, $words]) {
            try {
                Payload::of($value);
                $this->fail("accepted $words");
            } catch (InvalidPayload $e) {
                $this->assertStringContainsString($words, $e->getMessage());
            }
        }
    }

    public function testKeysAndJobTypes(): void
    {
        $keys = Corpus::load('protocol/corpus/keys.json');
        foreach ($keys['job_types']['valid'] as $job) {
            $this->assertSame($job, Keys::validateJobType($job));
        }
        foreach ($keys['job_types']['invalid'] as $job) {
            $this->assertRefused(static fn () => Keys::validateJobType($job), $job);
        }
        foreach ($keys['op_keys']['valid'] as $key) {
            $this->assertSame($key, Keys::validateOpKey($key));
        }
        foreach ($keys['op_keys']['invalid'] as $key) {
            $this->assertRefused(static fn () => Keys::validateOpKey($key), $key);
        }
        foreach ($keys['idempotency_keys'] as $case) {
            $this->assertSame($case['idempotency_key'], Keys::idempotencyKey($case['job_type'], $case['op_key']));
        }
        Corpus::say(sprintf(
            'keys corpus: %d job types, %d keys',
            count($keys['job_types']['valid']) + count($keys['job_types']['invalid']),
            count($keys['op_keys']['valid']) + count($keys['op_keys']['invalid']),
        ));
    }

    public function testAnswersCorpusEveryCase(): void
    {
        $corpus = Corpus::load('protocol/corpus/answers.json');
        $this->assertGreaterThanOrEqual(30, count($corpus['cases']), 'the corpus lost its cases');
        foreach ($corpus['cases'] as $case) {
            $text = str_repeat($case['text'], $case['repeat'] ?? 1);
            $rule = null;
            try {
                $case['part'] === 'reference' ? Answer::checkReference($text) : Answer::checkResult($text);
            } catch (AnswerError $e) {
                $rule = $e->rule;
                $this->assertSame($e->getMessage(), Answer::escapeControls($e->getMessage()), "the message shows a control raw: {$case['name']}");
            }
            $this->assertSame($case['error'], $rule, $case['name']);
        }
        foreach ($corpus['escapes'] as $case) {
            $this->assertSame($case['shown'], Answer::escapeControls($case['text']), $case['text']);
        }
        Corpus::say(sprintf('answers corpus: %d cases, %d escapes', count($corpus['cases']), count($corpus['escapes'])));
    }

    public function testDatabaseUrlsAreShownAsTheCorpusSays(): void
    {
        $corpus = Corpus::load('protocol/corpus/db_urls.json');
        foreach ($corpus['cases'] as $case) {
            $this->assertSame($case['shown'], DbUrl::redact($case['url']), $case['name']);
        }
    }

    private function assertRefused(callable $f, string $what): void
    {
        try {
            $f();
            $this->fail('accepted ' . json_encode($what));
        } catch (InvalidKey) {
            $this->addToAssertionCount(1);
        }
    }
}
